// --plot: bus bandwidth against message size as a self-contained SVG (log-scale size axis).
#pragma once

#include <string>
#include <vector>

#include "perf_table.hpp"

namespace perf {

/// Writes the plot of `rows` to `path`; `title` goes on top. Returns false if the file can't be
/// written.
bool write_plot(const std::string& path, const std::string& title, const std::vector<Row>& rows);

}  // namespace perf
