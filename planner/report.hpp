// strata-plan's output: a ranked table for people, and the same as JSON.
#pragma once

#include <string>
#include <vector>

#include "plan.hpp"

namespace plan {

/// What was planned (model, cluster, compute rate, precision, batch), then the first `top`
/// candidates that fit, ranked, each with its time and memory breakdown; a refused layout with
/// its reason.
std::string table(const Request& r, const std::vector<Candidate>& ranked, int top);
/// Every candidate with every term (seconds, bytes), and the request.
std::string json(const Request& r, const std::vector<Candidate>& ranked);

}  // namespace plan
