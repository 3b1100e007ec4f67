// The certification report's pictures (internal to trainer/report*.cpp): the inventory, each
// layout's mesh, the loss curves and the bubbles, as self-contained SVG text.
#pragma once

#include <string>

#include "validate/report.hpp"

namespace gpt::rep {

std::string inventory_svg(const Report& r);
std::string mesh_svg(const Report& r, const ReportLayout& l);
std::string losses_svg(const Report& r);
std::string bubble_svg(const Report& r);

}  // namespace gpt::rep
