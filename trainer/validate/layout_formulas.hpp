// What a layout should cost, from its sizes alone (docs/trainer.md derives each formula): the
// bytes each group moves per step and the memory each rank holds. The trainer's measured figures
// must equal these; validate prints both side by side.
#pragma once

#include <cstddef>

#include "train/gpt_trainer.hpp"

namespace gpt {

/// One step's traffic of the rank at pipeline stage `stage` of a layout on `ranks` ranks.
struct Traffic {
  double tp_bus_bytes = 0;  ///< its tp group's collectives, nccl-tests bus sense
  double pp_bytes = 0;      ///< activations and gradients it sends to other stages
  /// Its engine's collectives (gradient reduction, parameter gathers, clipping's norm), bus sense,
  /// in a steady step (stages 1-2 gather one step's parameters in the next; stage 3 its units
  /// as the schedule's passes read them, the first step reading in an order not yet recorded).
  double dp_bus_bytes = 0;
  double dp_gather_bus_bytes = 0;  ///< of dp_bus_bytes, the parameters' all-gathers
  double ep_bus_bytes = 0;         ///< the dense gradients' average over ep, bus sense
  double cp_bytes = 0;             ///< attention's keys and values (ring) or rows (all-to-all) sent
};
Traffic traffic_formula(const TrainOptions& o, int ranks, int stage);

/// Parameters this rank holds (padded as the engine pads each unit to a multiple of dp), and
/// its parameter, gradient and optimizer-state bytes under ZeRO stage o.stage.
struct Memory {
  size_t params = 0;
  size_t dense = 0;  ///< of which replicated over ep (all but experts), unpadded
  size_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;
};
Memory memory_formula(const TrainOptions& o, int ranks, int stage);

}  // namespace gpt
