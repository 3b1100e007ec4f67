// The loss curve of a training run as a self-contained SVG: training loss per step and
// validation loss where it was measured.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gpt {

/// (step, loss) points. Returns false if `path` cannot be written.
bool write_loss_plot(const std::string& path, const std::string& title,
                     const std::vector<std::pair<int, float>>& train,
                     const std::vector<std::pair<int, float>>& val);

}  // namespace gpt
