// A plan request for the planner's tests: a preset model on an NxG cluster of H100s.
#pragma once

#include <string>

#include "plan.hpp"

namespace plan_test {

inline plan::Request request(const std::string& model, const std::string& nxg, plan::Precision p,
                             int batch) {
  plan::Request r;
  r.model = plan::model_preset(model);
  r.cluster = plan::cluster_of(nxg, "h100", p);
  r.precision = p;
  r.batch = batch;
  return r;
}

}  // namespace plan_test
