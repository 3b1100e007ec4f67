// Links against an installed Strata and runs a one-rank all-reduce.
#include <cstdio>
#include <strata/strata.hpp>
#include <vector>

int main() {
  auto world = strata::Communicator::from_env();
  std::vector<double> v = {1.5, -2.0};
  world.all_reduce(strata::buffer(v), strata::ReduceOp::sum).wait();
  std::printf("consumer ok: rank %d of %d, v = %g %g\n", world.rank(), world.size(), v[0], v[1]);
  return v[0] == 1.5 * world.size() && v[1] == -2.0 * world.size() ? 0 : 1;
}
