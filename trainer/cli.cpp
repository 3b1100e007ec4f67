#include "cli.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#ifndef STRATA_GPT_DATA
#define STRATA_GPT_DATA "data/tinyshakespeare.txt"
#endif

namespace gpt {

std::string usage() {
  return R"(usage: strata-gpt [train|validate] [options]     (under mpirun, strata-run or srun)

  train      trains the model over every rank in the layout given (the default: data-parallel)
  validate   trains the same steps under every layout the world size allows (tp x pp x dp with
             each schedule, sp, ZeRO-1/2/3), computes the one-rank reference itself, prints a
             table; exit 1 on any mismatch, 2 on bad input

model (default: --config small):
  --config tiny|small  tiny: 2 layers, 2 heads, 32 wide, 16 characters of context (tests);
                       small: 6 layers, 6 heads, 192 wide, 128 characters (2.7 M parameters)
  --layers L  --heads H  --embd C  --ctx T    override the named configuration's dimensions
  --experts E          mixture of experts: E expert MLPs with a softmax router (default 0: none)
  --top-k K            experts per token, gates renormalised over them (default 2)
  --moe-every N        experts in block l when l % N == 0 (default 1: every block)
  --capacity-factor F  each expert takes at most ceil(F T k / E) of a sequence's assignments, the
                       most probable first (default 0: dropless)
  --aux-loss-coef X    weight of the load-balancing loss (default 0.01)
training:
  --steps N            optimizer steps (default 200; 20 for validate, which needs 2 or more)
  --batch B            sequences per step over all ranks (default 32)
  --micro-batches M    per data-parallel rank and step: pipeline micro-batches, or gradient
                       accumulation without a pipeline (default 1; --micro M is the same)
  --lr X  --min-lr X   peak and final learning rate (default 3e-3, 3e-4)
  --warmup N           linear warm-up steps before the cosine decay (default: a tenth of
                       --steps but at least 20, or half of a shorter run; validate: --steps,
                       at least 20)
  --wd X  --clip X     AdamW weight decay (default 0.1), gradient-norm clip (default 1; 0: off)
  --seed N             initialisation and data order (default 1337)
layout (dp = ranks / (tp * cp * ep * pp)):
  --tp N               tensor-parallel size; divides the heads (default 1)
  --ep N               expert-parallel size: E / N experts per rank, each rank its own data
                       (default 1; needs --experts)
  --cp N               context-parallel size: each rank holds ctx / N positions of every
                       sequence (two chunks, causal work balanced; default 1)
  --cp-comm p2p|a2a    ring attention (keys and values around the ring, overlapped) or
                       Ulysses (all-to-all to a head split; heads divide by tp * cp)
  --sp                 sequence parallelism inside each tp group (needs --tp > 1)
  --pp N               pipeline stages (default 1)
  --schedule S         gpipe, 1f1b or interleaved (default 1f1b)
  --virtual-stages V   model chunks per pipeline rank, interleaved only (default 1)
  --allow-cross-node-tp  let a tp group span nodes (refused by default)
  --stage 0|1|2|3      ZeRO stage over dp; 0 is plain data parallelism (default 0)
  --prefetch N         ZeRO-3 parameter gathers issued ahead (default 1)
  --bucket-kb N        gradient bucket size in KiB (default 1024)
  --recompute          recompute activations in the backward pass
  --optimizer adamw|sgd  the (inner) optimizer: AdamW, or SGD without momentum (default adamw)
  --offload-optimizer disk:DIR  AdamW's moments in a scratch file in DIR, streamed through a
                       window (ZeRO-Offload to disk; results bit-identical)
  --offload-window MiB the resident window of the offloaded state (default 64)
  --offload-params     with --stage 3 and --offload-optimizer: the parameter shard in the
                       file too, read as units are gathered
islands (DiLoCo, docs/beyond-one-cluster.md):
  --islands K          K replicas of the layout, ranks / K each, each its share of the batch
  --outer-every H      an outer step every H steps (default 50 with --islands; 0: none)
  --outer-lr X  --outer-momentum X   outer SGD with Nesterov momentum (default 0.7, 0.9)
  --outer-streaming F  the model in F fragments on staggered schedules, each exchange running
                       behind the next step (Streaming DiLoCo; default 1: all at once)
  --outer-dtype T      f32, bf16 or int8 (one scale per 256 values) for the exchange
  --join HOST:PORT     be one new island of a running islands job, whose store is at HOST:PORT
                       (its STRATA_STORE_PORT; STRATA_JOIN_TOKEN: its STRATA_JOB_TOKEN); the
                       same options as that job, this job's ranks one island's
output:
  --eval-every N       validation loss every N steps (default 50; 0: never)
  --eval-batches N     batches per validation (default 4)
  --sample N           characters sampled after training (default 200; 0: none)
  --json FILE  --plot FILE.svg   metrics per step, loss curve
  --quiet              no per-step lines
state:     --save DIR  --save-every N (default 0: at the end only)  --resume DIR
data:      --data FILE (default: the bundled tiny shakespeare; STRATA_GPT_DATA overrides)
validate:
  --tolerance X        largest relative loss difference from one rank (default 1e-5); the
                       gradient norm's bound is derived (docs/trainer.md)
  --layouts L1,L2,...  e.g. tp2.pp2.dp2,pp4.interleaved,ep2.dp2,cp2.a2a (default: every
                       layout the world allows; with --experts, the ep layouts too)
  --report DIR         write the certification report there (Markdown + SVG)
  --bw-threshold X     a group's bus bandwidth must reach X times its weakest link's estimate
                       from the topology (default 0.05)
)";
}

namespace {

long to_long(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end) throw std::invalid_argument(flag + ": not an integer: '" + v + "'");
  return x;
}
double to_double(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !std::isfinite(x))  // "--lr inf" passed every check after it
    throw std::invalid_argument(flag + ": not a finite number: '" + v + "'");
  return x;
}
// A float option: finite as a double and within float's range ("--lr 1e39" became inf).
float to_float(const std::string& flag, const std::string& v) {
  const double x = to_double(flag, v);
  if (std::fabs(x) > double(std::numeric_limits<float>::max()))
    throw std::invalid_argument(flag + ": " + v + " is beyond a float's range");
  return float(x);
}
int positive(const std::string& flag, const std::string& v) {
  const long x = to_long(flag, v);
  if (x <= 0 || x > 1 << 30)
    throw std::invalid_argument(flag + ": must be from 1 to " + std::to_string(1 << 30) + ", got " +
                                v);
  return int(x);
}
int non_negative(const std::string& flag, const std::string& v) {
  const long x = to_long(flag, v);
  if (x < 0 || x > 1 << 30)
    throw std::invalid_argument(flag + ": must be from 0 to " + std::to_string(1 << 30) + ", got " +
                                v);
  return int(x);
}

// "HOST:PORT", checked here so that a typo is named before any rank starts.
std::string host_port(const std::string& flag, const std::string& v) {
  const size_t colon = v.rfind(':');
  const std::string digits = colon == std::string::npos ? "" : v.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(digits.c_str(), &end, 10);
  if (colon == 0 || digits.empty() || *end || port < 1 || port > 65535)
    throw std::invalid_argument(flag + ": expected HOST:PORT (port 1-65535), got '" + v + "'");
  return v;
}

// Options that the mode, or the rest of the command line, would leave without effect: refused,
// so that a run is never taken for what it was not ("validate --json x" wrote nothing).
void refuse_unused(const RunOptions& r, const std::set<std::string>& given) {
  static const std::set<std::string> train_only = {
      "--eval-every", "--eval-batches",   "--sample",          "--json",        "--plot",
      "--save",       "--save-every",     "--resume",          "--islands",     "--outer-every",
      "--outer-lr",   "--outer-momentum", "--outer-streaming", "--outer-dtype", "--join"};
  static const std::set<std::string> validate_only = {"--tolerance", "--layouts", "--report",
                                                      "--bw-threshold"};
  const auto& other = r.mode == "validate" ? train_only : validate_only;
  for (const std::string& f : given) {
    if (other.count(f))
      throw std::invalid_argument(f + " applies to " +
                                  (r.mode == "validate" ? "train" : "validate") + " only");
  }
  const TrainOptions& t = r.train;
  for (const char* f : {"--outer-lr", "--outer-momentum", "--outer-streaming", "--outer-dtype"}) {
    if (given.count(f) && t.islands < 2)
      throw std::invalid_argument(std::string(f) + " needs --islands K");
  }
  for (const char* f : {"--top-k", "--moe-every", "--capacity-factor", "--aux-loss-coef"}) {
    if (given.count(f) && t.model.experts == 0)
      throw std::invalid_argument(std::string(f) + " needs --experts E");
  }
}

}  // namespace

RunOptions parse_command_line(int argc, char** argv, bool& help) {
  RunOptions r;
  help = false;
  if (const char* d = std::getenv("STRATA_GPT_DATA"))
    r.data = d;
  else
    r.data = STRATA_GPT_DATA;
  for (int k = 0; k < argc; ++k) {
    if (k) r.command_line += ' ';
    r.command_line += argv[k];
  }
  int i = 1;
  if (i < argc && argv[i][0] != '-') r.mode = argv[i++];
  if (r.mode != "train" && r.mode != "validate")
    throw std::invalid_argument("unknown mode '" + r.mode + "' (train or validate)");
  TrainOptions& t = r.train;
  Config& c = t.model;
  using Setter = std::function<void(const std::string&, const std::string&)>;
  const std::map<std::string, Setter> flags = {
      {"--config", [](auto&, auto&) {}},  // applied above
      {"--layers", [&](auto& f, auto& v) { c.layers = positive(f, v); }},
      {"--heads", [&](auto& f, auto& v) { c.heads = positive(f, v); }},
      {"--embd", [&](auto& f, auto& v) { c.embd = positive(f, v); }},
      {"--ctx", [&](auto& f, auto& v) { c.ctx = positive(f, v); }},
      {"--experts", [&](auto& f, auto& v) { c.experts = non_negative(f, v); }},
      {"--top-k", [&](auto& f, auto& v) { c.top_k = positive(f, v); }},
      {"--moe-every", [&](auto& f, auto& v) { c.moe_every = positive(f, v); }},
      {"--capacity-factor",
       [&](auto& f, auto& v) {
         c.capacity_factor = to_double(f, v);
         if (!(c.capacity_factor >= 0)) throw std::invalid_argument(f + ": must be >= 0, got " + v);
       }},
      {"--aux-loss-coef",
       [&](auto& f, auto& v) {
         c.aux_loss_coef = to_float(f, v);
         if (!(c.aux_loss_coef >= 0)) throw std::invalid_argument(f + ": must be >= 0, got " + v);
       }},
      {"--steps", [&](auto& f, auto& v) { t.steps = positive(f, v); }},
      {"--batch", [&](auto& f, auto& v) { t.global_batch = positive(f, v); }},
      {"--micro", [&](auto& f, auto& v) { t.micro_batches = positive(f, v); }},
      {"--lr", [&](auto& f, auto& v) { t.lr = to_float(f, v); }},
      {"--min-lr", [&](auto& f, auto& v) { t.min_lr = to_float(f, v); }},
      {"--warmup", [&](auto& f, auto& v) { t.warmup = non_negative(f, v); }},
      {"--wd", [&](auto& f, auto& v) { t.weight_decay = to_float(f, v); }},
      {"--clip", [&](auto& f, auto& v) { t.max_grad_norm = to_float(f, v); }},
      {"--seed", [&](auto& f, auto& v) { t.seed = uint64_t(non_negative(f, v)); }},
      {"--stage",
       [&](auto& f, auto& v) {
         t.stage = non_negative(f, v);
         if (t.stage > 3) throw std::invalid_argument(f + ": 0, 1, 2 or 3, got " + v);
       }},
      {"--prefetch", [&](auto& f, auto& v) { t.prefetch = non_negative(f, v); }},
      {"--bucket-kb", [&](auto& f, auto& v) { t.bucket_bytes = size_t(positive(f, v)) << 10; }},
      {"--optimizer",
       [&](auto& f, auto& v) {
         if (v != "adamw" && v != "sgd")
           throw std::invalid_argument(f + ": adamw or sgd, got " + v);
         t.rule = v == "sgd" ? strata::UpdateRule::sgd : strata::UpdateRule::adamw;
       }},
      {"--offload-optimizer",
       [&](auto& f, auto& v) {
         if (v.rfind("disk:", 0) != 0 || v.size() == 5)
           throw std::invalid_argument(f + ": disk:DIR, got '" + v + "'");
         t.offload.optimizer_dir = v.substr(5);
       }},
      {"--offload-window",
       [&](auto& f, auto& v) { t.offload.window_bytes = size_t(positive(f, v)) << 20; }},
      {"--islands", [&](auto& f, auto& v) { t.islands = positive(f, v); }},
      {"--outer-every", [&](auto& f, auto& v) { t.outer_every = non_negative(f, v); }},
      {"--outer-lr", [&](auto& f, auto& v) { t.outer_lr = to_float(f, v); }},
      {"--outer-momentum", [&](auto& f, auto& v) { t.outer_momentum = to_float(f, v); }},
      {"--outer-streaming", [&](auto& f, auto& v) { t.outer_fragments = positive(f, v); }},
      {"--join", [&](auto& f, auto& v) { t.join = host_port(f, v); }},
      {"--outer-dtype",
       [&](auto& f, auto& v) {
         if (v != "f32" && v != "bf16" && v != "int8")
           throw std::invalid_argument(f + ": f32, bf16 or int8, got " + v);
         t.outer_dtype = v == "f32"    ? strata::OuterDtype::f32
                         : v == "bf16" ? strata::OuterDtype::bf16
                                       : strata::OuterDtype::int8;
       }},
      {"--eval-every", [&](auto& f, auto& v) { r.eval_every = non_negative(f, v); }},
      {"--eval-batches", [&](auto& f, auto& v) { r.eval_batches = positive(f, v); }},
      {"--sample", [&](auto& f, auto& v) { r.sample_chars = non_negative(f, v); }},
      {"--json", [&](auto&, auto& v) { r.json = v; }},
      {"--plot", [&](auto&, auto& v) { r.plot = v; }},
      {"--save", [&](auto&, auto& v) { r.save = v; }},
      {"--save-every", [&](auto& f, auto& v) { r.save_every = non_negative(f, v); }},
      {"--resume", [&](auto&, auto& v) { r.resume = v; }},
      {"--data", [&](auto&, auto& v) { r.data = v; }},
      {"--tolerance", [&](auto& f, auto& v) { r.tolerance = to_double(f, v); }},
      {"--tp", [&](auto& f, auto& v) { t.tp = positive(f, v); }},
      {"--pp", [&](auto& f, auto& v) { t.pp = positive(f, v); }},
      {"--ep", [&](auto& f, auto& v) { t.ep = positive(f, v); }},
      {"--cp", [&](auto& f, auto& v) { t.cp = positive(f, v); }},
      {"--cp-comm", [&](auto&, auto& v) { t.cp_comm = parse_cp_comm(v); }},
      {"--micro-batches", [&](auto& f, auto& v) { t.micro_batches = positive(f, v); }},
      {"--schedule", [&](auto&, auto& v) { t.schedule = pp::parse_schedule(v); }},
      {"--virtual-stages", [&](auto& f, auto& v) { t.virtual_stages = positive(f, v); }},
      {"--layouts", [&](auto&, auto& v) { r.layouts = v; }},
      {"--report", [&](auto&, auto& v) { r.report = v; }},
      {"--bw-threshold", [&](auto& f, auto& v) { r.bw_threshold = to_double(f, v); }},
  };
  // Flags without a value.
  const std::map<std::string, bool*> switches = {{"--recompute", &t.recompute},
                                                 {"--quiet", &r.quiet},
                                                 {"--sp", &t.sp},
                                                 {"--offload-params", &t.offload.params},
                                                 {"--allow-cross-node-tp", &t.allow_cross_node_tp}};
  if (r.mode == "validate") t.steps = 20;  // five trainings of the same steps: keep it short
  // The named configuration first (small unless --config says otherwise), so that dimension
  // flags override it wherever they stand.
  c = Config::named("small");
  for (int k = i; k + 1 < argc; ++k)
    if (std::string(argv[k]) == "--config") c = Config::named(argv[k + 1]);
  std::set<std::string> given;
  for (; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--help" || f == "-h") {
      help = true;
      return r;
    }
    if (auto sw = switches.find(f); sw != switches.end()) {
      *sw->second = true;
      continue;
    }
    auto it = flags.find(f);
    if (it == flags.end()) throw std::invalid_argument("unknown option " + f);
    given.insert(f);
    if (i + 1 >= argc) throw std::invalid_argument(f + " needs a value");
    it->second(f, argv[++i]);
  }
  refuse_unused(r, given);
  if (t.islands > 1 && !given.count("--outer-every")) t.outer_every = 50;  // DiLoCo's published H
  if (t.outer_every > 0 && r.mode == "validate")
    throw std::invalid_argument(
        "validate certifies one island's layouts: --islands, --outer-every "
        "are for train");
  // The traffic formulas are a steady step's: the first sets up (stages 1-2 gather no
  // parameters yet, stage 3 gathers in an order not yet recorded) and is compared only alone.
  if (r.mode == "validate" && t.steps < 2)
    throw std::invalid_argument(
        "validate needs --steps 2 or more: its last step is held to the "
        "traffic formulas, which are a steady step's");
  if (!t.join.empty() && t.islands < 2)
    throw std::invalid_argument("--join needs --islands K, as the job it joins was started with");
  if (t.offload.params && (t.stage != 3 || t.offload.optimizer_dir.empty()))
    throw std::invalid_argument(
        "--offload-params needs --stage 3 and --offload-optimizer disk:DIR");
  if (t.rule == strata::UpdateRule::sgd && !t.offload.optimizer_dir.empty() && !t.offload.params)
    throw std::invalid_argument(
        "--offload-optimizer with --optimizer sgd: SGD keeps no optimizer state to offload "
        "(--offload-params moves the parameter shard at --stage 3)");
  if (!t.join.empty() && (!r.save.empty() || !r.resume.empty()))
    throw std::invalid_argument(
        "--save and --resume with --join: a joining island takes its state from the running "
        "islands, which save it");
  // The warm-up: a tenth of a long run, so that it ends decaying; but 20 steps where the run
  // allows (half of a short one): Adam's second moments (beta2 0.95) average over about 20
  // steps, and before that the peak rate is not safe (on `small`, 2 steps of warm-up send the
  // loss from 3.4 to 5.6 at step 4).
  // validate warms up over all its steps, and over no fewer than 20: a layout's rounding, ~1e-7,
  // stays there, while a steeper ramp or the peak rate amplifies it up to ~100x within a few
  // steps, past the tolerance (docs/trainer.md).
  if (!given.count("--warmup"))
    t.warmup = r.mode == "validate" ? std::max(20, t.steps)
                                    : std::max({1, t.steps / 10, std::min(20, t.steps / 2)});
  if (c.embd % c.heads != 0)
    throw std::invalid_argument("--embd " + std::to_string(c.embd) +
                                " does not divide by --heads " + std::to_string(c.heads));

  if (!(t.lr > 0) || !(t.min_lr >= 0) || !(t.weight_decay >= 0) || !(t.max_grad_norm >= 0))
    throw std::invalid_argument("--lr must be > 0 and --min-lr, --wd, --clip >= 0");
  if (t.min_lr > t.lr)
    throw std::invalid_argument("--min-lr " + std::to_string(t.min_lr) + " exceeds --lr " +
                                std::to_string(t.lr) +
                                " (the cosine decays from one to the other)");
  if (!(r.tolerance > 0)) throw std::invalid_argument("--tolerance must be > 0");
  if (!(r.bw_threshold >= 0)) throw std::invalid_argument("--bw-threshold must be >= 0");
  return r;
}

}  // namespace gpt
