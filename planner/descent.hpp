// The planner's one fitting method (calibration, measured links): coordinate descent of a
// non-negative error over positive figures, each in turn scanned over factors of 1/100 to 100
// of its value (20 steps a decade), three rounds. Crude but robust: a few figures, an error
// that is cheap to evaluate and need not be smooth (the library's choice of algorithm jumps).
#pragma once

#include <cmath>
#include <vector>

namespace plan {

template <typename Error>
void descend(const std::vector<double*>& figures, Error error) {
  for (int round = 0; round < 3; ++round) {
    for (double* x : figures) {
      const double start = *x;
      double best = start, best_error = error();
      for (int step = -40; step <= 40; ++step) {
        *x = start * std::pow(10.0, step / 20.0);
        const double e = error();
        if (e < best_error) best = *x, best_error = e;
      }
      *x = best;
    }
  }
}

}  // namespace plan
