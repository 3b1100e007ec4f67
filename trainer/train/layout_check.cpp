// A layout's checks before any rank builds anything (each refusal names the flag and the numbers
// that disagree), the ranks it trains on and reads with, and its name in validate's spelling.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/moe.hpp"
#include "train/trainer_impl.hpp"

namespace gpt {
namespace {

void refuse(const std::string& why) { throw std::invalid_argument(why); }

}  // namespace

void check_layout(const TrainOptions& o, int job_ranks) {
  if (o.islands < 1 || job_ranks % o.islands != 0)
    refuse("--islands " + std::to_string(o.islands) + " does not divide the " +
           std::to_string(job_ranks) + " ranks");
  if (o.islands > 1 && o.outer_every < 1) refuse("--islands needs --outer-every H (DiLoCo)");
  if (o.outer_every < 0 || (o.outer_every > 0 && (!(o.outer_lr > 0) || !(o.outer_momentum >= 0) ||
                                                  !(o.outer_momentum < 1))))
    refuse("DiLoCo: --outer-every must be >= 0, --outer-lr > 0, --outer-momentum in [0, 1)");
  if (o.outer_fragments < 1 || (o.outer_every > 0 && o.outer_fragments > o.outer_every))
    refuse("--outer-streaming " + std::to_string(o.outer_fragments) +
           ": 1 to --outer-every fragments");
  const int ranks = job_ranks / o.islands;  // an island's
  const Config& c = o.model;
  const int split = o.tp * o.cp * o.ep * o.pp;
  if (o.tp < 1 || o.pp < 1 || o.ep < 1 || o.cp < 1 || ranks % split != 0) {
    const std::string cp = o.cp != 1 ? " cp=" + std::to_string(o.cp) : "";
    const std::string ep = o.ep != 1 ? " ep=" + std::to_string(o.ep) : "";
    refuse("layout tp=" + std::to_string(o.tp) + cp + ep + " pp=" + std::to_string(o.pp) + ": tp*" +
           (cp.empty() ? "" : "cp*") + (ep.empty() ? "" : "ep*") + "pp = " + std::to_string(split) +
           " does not divide the " + std::to_string(ranks) + " ranks");
  }
  if (o.cp > 1 && c.ctx % (2 * o.cp) != 0)
    refuse("--cp " + std::to_string(o.cp) + ": the sequence of " + std::to_string(c.ctx) +
           " positions does not split into 2 cp = " + std::to_string(2 * o.cp) + " chunks");
  if (o.cp > 1 && o.cp_comm == CpComm::a2a && (c.heads % o.tp != 0 || c.heads / o.tp % o.cp != 0))
    refuse("--cp-comm a2a: the " + std::to_string(c.heads) + " heads" +
           (o.tp > 1 ? " (" + std::to_string(c.heads / o.tp) + " per tp rank)" : "") +
           " do not divide over cp=" + std::to_string(o.cp));
  if (o.ep > 1 && c.experts == 0) refuse("--ep " + std::to_string(o.ep) + " needs --experts");
  if (c.experts > 0 && c.experts % o.ep != 0)
    refuse("--experts " + std::to_string(c.experts) + " does not divide over --ep " +
           std::to_string(o.ep) + " ranks");
  if (c.heads % o.tp != 0)
    refuse("--tp " + std::to_string(o.tp) + " does not divide the " + std::to_string(c.heads) +
           " heads");
  if (c.experts > 0 && c.top_k > std::min(c.experts, moe::kMaxTopK))
    refuse("--top-k " + std::to_string(c.top_k) + " exceeds --experts " +
           std::to_string(c.experts) + " (a token takes k distinct experts, at most " +
           std::to_string(moe::kMaxTopK) + ")");
  if (o.sp && o.tp < 2) refuse("--sp needs --tp 2 or more (it shards the sequence over tp)");
  if (o.sp && c.ctx / o.cp % o.tp != 0)
    refuse("--sp: the sequence of " + std::to_string(c.ctx / o.cp) + " positions" +
           (o.cp > 1 ? " (on each cp rank)" : "") +
           " does not divide by tp=" + std::to_string(o.tp));
  if (o.virtual_stages > 1 && o.schedule != pp::Schedule::interleaved)
    refuse("--virtual-stages " + std::to_string(o.virtual_stages) +
           " needs --schedule interleaved");
  const int stages = o.pp * o.virtual_stages;
  if (stages > c.layers)
    refuse(std::to_string(stages) + " pipeline stages (pp=" + std::to_string(o.pp) + " x " +
           std::to_string(o.virtual_stages) + " virtual) but only " + std::to_string(c.layers) +
           " layers");
  if (o.pp > 1 || o.schedule == pp::Schedule::interleaved)
    pp::check_schedule(o.schedule, o.pp, o.micro_batches, o.virtual_stages);
  const long readers = data_ranks(o, ranks), per_step = readers * o.islands * o.micro_batches;
  if (o.micro_batches < 1 || o.global_batch < 1 || o.global_batch % per_step != 0)
    refuse("global batch " + std::to_string(o.global_batch) + " does not divide into " +
           (o.islands > 1 ? std::to_string(o.islands) + " islands x " : "") +
           (o.ep > 1 ? "ep x dp=" : "dp=") + std::to_string(readers) + " x " +
           std::to_string(o.micro_batches) + " micro-batches");
  const long micro = o.global_batch / per_step;
  if (c.experts > 0 && micro % o.tp != 0)
    refuse("--experts with --tp " + std::to_string(o.tp) + ": micro-batches of size " +
           std::to_string(micro) + " do not divide over tp (each tp rank routes whole sequences)");
}

int training_ranks(const TrainOptions& o, int job_ranks) {
  return o.join.empty() ? job_ranks : job_ranks * o.islands;
}

int data_ranks(const TrainOptions& o, int ranks) { return ranks / (o.tp * o.cp * o.pp); }

std::string layout_name(const TrainOptions& o, int job_ranks) {
  const int ranks = job_ranks / o.islands;
  std::string n;
  if (o.tp > 1) n += "tp" + std::to_string(o.tp) + (o.sp ? ".sp." : ".");
  if (o.pp > 1) {
    n += "pp" + std::to_string(o.pp) + "." + std::string(pp::schedule_name(o.schedule));
    if (o.virtual_stages > 1) n += ".v" + std::to_string(o.virtual_stages);
    n += ".";
  }
  if (o.cp > 1) n += "cp" + std::to_string(o.cp) + (o.cp_comm == CpComm::a2a ? ".a2a." : ".");
  if (o.ep > 1) n += "ep" + std::to_string(o.ep) + ".";
  n += "dp" + std::to_string(ranks / (o.tp * o.cp * o.ep * o.pp));
  if (o.stage > 0) n += ".zero" + std::to_string(o.stage);
  if (o.outer_every > 0)
    n += ".islands" + std::to_string(o.islands) + ".h" + std::to_string(o.outer_every);
  if (o.outer_every > 0 && o.outer_fragments > 1) n += ".f" + std::to_string(o.outer_fragments);
  if (o.outer_every > 0 && o.outer_dtype != strata::OuterDtype::f32)
    n += o.outer_dtype == strata::OuterDtype::bf16 ? ".bf16" : ".int8";
  return n;
}

}  // namespace gpt
