// Checkpoints of DiLoCo islands: each island's whole model and AdamW moments under DIR/island-P
// (P its place among the islands training, any layout could read it), each rank's shard of the
// outer state beside them (the same on every island; the same layout must read it), and
// DIR/islands, their count. Taken after the exchange in flight is applied, so a run that saves
// and one that saves and resumes agree bit for bit.
#include <algorithm>
#include <stdexcept>

#include "train/model_checkpoint.hpp"
#include "train/trainer_impl.hpp"

namespace gpt {

namespace {

std::string island_dir(const std::string& dir, const strata::DiLoCo& d) {
  const auto& left = d.islands_left();
  const auto place = std::find(left.begin(), left.end(), d.island_index()) - left.begin();
  return dir + "/island-" + std::to_string(place);
}

// What the outer state's shard space depends on: the island's layout and ZeRO stage.
std::string outer_layout(const TrainOptions& o, int island_ranks) {
  return layout_name(o, island_ranks) + " stage " + std::to_string(o.stage);
}

}  // namespace

void Trainer::Impl::save_islands(const std::string& dir) {
  const strata::OuterState outer = diloco->state();
  const std::string mine = island_dir(dir, *diloco);
  std::string error = write_whole(mine);
  if (error.empty()) try {
      write_outer_checkpoint(mine, metrics.rank(), outer, outer_layout(o, islands.island.size()));
      if (metrics.rank() == 0 && diloco->islands_left().front() == diloco->island_index())
        write_saved_islands(dir, int(diloco->islands_left().size()));
    } catch (const std::exception& e) {
      error = e.what();
    }
  // Every rank of every island learns whether all wrote their part.
  std::vector<int> ok{error.empty() ? 1 : 0};
  metrics.all_reduce(strata::buffer(ok), strata::ReduceOp::min).wait();
  std::vector<double> all{double(ok[0])};
  diloco->average_over_islands(all);
  if (all[0] < 1.0)
    throw std::runtime_error(
        !error.empty() ? error
        : ok[0]        ? "checkpoint " + dir + ": another island could not write its part"
                       : "checkpoint " + mine + ": another rank could not write its part");
}

void Trainer::Impl::load_islands(const std::string& dir) {
  const int saved = saved_islands(dir), now = int(diloco->islands_left().size());
  if (saved != now)
    throw std::invalid_argument("checkpoint " + dir + " holds " +
                                (saved ? std::to_string(saved) + " islands"
                                       : std::string("no islands (saved without DiLoCo)")) +
                                "; this run has " + std::to_string(now) + " (--islands)");
  const std::string mine = island_dir(dir, *diloco);
  read_whole(mine);
  diloco->set_state(
      read_outer_checkpoint(mine, metrics.rank(), outer_layout(o, islands.island.size())));
}

}  // namespace gpt
