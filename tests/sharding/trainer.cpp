// The distributed trainer of the sharding tests: the model's layers driven through a ZeroEngine.
#include "model.hpp"

namespace shtest {

void train_step(const Mlp& m, strata::ZeroEngine& e, int step, int rank, int world,
                size_t global_batch) {
  const size_t per = global_batch / size_t(world), L = m.layers();
  Batch b = batch(m, step, size_t(rank) * per, per);
  std::vector<std::vector<float>> acts(L + 1);
  acts[0] = b.x;
  e.begin_forward();
  for (size_t l = 0; l < L; ++l) {
    e.gather(l);
    forward_layer(m, l, e.param(2 * l), e.param(2 * l + 1), acts[l], acts[l + 1], per);
    e.release(l);
  }
  std::vector<float> dz = loss_grad(acts[L], b), dz_prev;
  e.begin_backward();
  for (size_t l = L; l-- > 0;) {
    e.gather(l);
    backward_layer(m, l, e.param(2 * l), acts[l], dz, e.grad(2 * l), e.grad(2 * l + 1), dz_prev,
                   per);
    e.ready(2 * l + 1);
    e.ready(2 * l);
    e.release(l);
    dz.swap(dz_prev);
  }
  e.step();
}

void init_engine(const Mlp& m, strata::ZeroEngine& e) {
  for (size_t t = 0; t < 2 * m.layers(); ++t) e.set_param(t, m.init(t));
}

}  // namespace shtest
