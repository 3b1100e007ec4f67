// Known mistakes a test can plant in the trainer to prove that its checks catch them (mutation
// testing: a tolerance that a real bug cannot exceed proves nothing). Each is a mistake these
// parallelisms are easy to make; docs/trainer.md records the error each causes.
#pragma once

namespace gpt {

enum class Fault {
  none,
  contiguous_qkv,       ///< tp slices the packed q|k|v weight as one contiguous range of rows
  skip_tied_reduction,  ///< the first and last stage never sum the tied wte's gradient parts
};

/// Plants `f` in every Trainer of this process from now on (Fault::none removes it).
void plant_fault(Fault f);
/// Whether `f` is planted.
bool planted(Fault f);

}  // namespace gpt
