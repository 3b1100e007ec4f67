#include "cli.hpp"

#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>

#ifndef STRATA_GPT_DATA
#define STRATA_GPT_DATA "data/tinyshakespeare.txt"
#endif

namespace gpt {

std::string usage() {
  return R"(usage: strata-gpt [train|validate] [options]     (under mpirun or strata-run)

  train      trains the model over every rank in the layout given (the default: data-parallel)
  validate   trains the same steps under every layout the world size allows (tp x pp x dp with
             each schedule, sp, ZeRO-1/2/3), computes the one-rank reference itself, prints a
             table; exit 1 on any mismatch, 2 on bad input
             (--steps defaults to 20 here, 200 for train)

model:     --config tiny|small   --layers L  --heads H  --embd C  --ctx T
training:  --steps N  --batch B (global sequences per step)
           --micro-batches M (per data-parallel rank; --micro M is the same)
           --lr X  --min-lr X  --warmup N  --wd X  --clip X  --seed N
layout:    --tp N (tensor parallel; heads must divide)  --sp (sequence parallel, with --tp)
           --pp N (pipeline stages)  --schedule gpipe|1f1b|interleaved  --virtual-stages V
           --allow-cross-node-tp   (dp = ranks / (tp * pp))
           --stage 0|1|2|3 (ZeRO on dp; 0: DDP)  --prefetch N  --bucket-kb N  --recompute
output:    --eval-every N  --eval-batches N  --sample N  --json FILE  --plot FILE.svg  --quiet
state:     --save DIR  --save-every N  --resume DIR
data:      --data FILE (default: the bundled tiny shakespeare; STRATA_GPT_DATA overrides)
validate:  --tolerance X (relative, default 1e-5)
           --layouts L1,L2,... (e.g. tp2.pp2.dp2,pp4.interleaved; default: every layout the
           world size allows)  --report DIR (Markdown + SVG)
           --bw-threshold X (a group's bus bandwidth must reach X times its weakest link's
           estimate from the topology; default 0.05)
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
  if (v.empty() || *end) throw std::invalid_argument(flag + ": not a number: '" + v + "'");
  return x;
}
int positive(const std::string& flag, const std::string& v) {
  const long x = to_long(flag, v);
  if (x <= 0 || x > 1 << 30) throw std::invalid_argument(flag + ": must be positive, got " + v);
  return int(x);
}
int non_negative(const std::string& flag, const std::string& v) {
  const long x = to_long(flag, v);
  if (x < 0 || x > 1 << 30) throw std::invalid_argument(flag + ": must be >= 0, got " + v);
  return int(x);
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
      {"--steps", [&](auto& f, auto& v) { t.steps = positive(f, v); }},
      {"--batch", [&](auto& f, auto& v) { t.global_batch = positive(f, v); }},
      {"--micro", [&](auto& f, auto& v) { t.micro_batches = positive(f, v); }},
      {"--lr", [&](auto& f, auto& v) { t.lr = float(to_double(f, v)); }},
      {"--min-lr", [&](auto& f, auto& v) { t.min_lr = float(to_double(f, v)); }},
      {"--warmup", [&](auto& f, auto& v) { t.warmup = non_negative(f, v); }},
      {"--wd", [&](auto& f, auto& v) { t.weight_decay = float(to_double(f, v)); }},
      {"--clip", [&](auto& f, auto& v) { t.max_grad_norm = float(to_double(f, v)); }},
      {"--seed", [&](auto& f, auto& v) { t.seed = uint64_t(non_negative(f, v)); }},
      {"--stage",
       [&](auto& f, auto& v) {
         t.stage = non_negative(f, v);
         if (t.stage > 3) throw std::invalid_argument(f + ": 0, 1, 2 or 3, got " + v);
       }},
      {"--prefetch", [&](auto& f, auto& v) { t.prefetch = non_negative(f, v); }},
      {"--bucket-kb", [&](auto& f, auto& v) { t.bucket_bytes = size_t(positive(f, v)) << 10; }},
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
                                                 {"--allow-cross-node-tp", &t.allow_cross_node_tp}};
  if (r.mode == "validate") t.steps = 20;  // five trainings of the same steps: keep it short
  // The named configuration first, so that dimension flags override it wherever they stand.
  for (int k = i; k + 1 < argc; ++k)
    if (std::string(argv[k]) == "--config") c = Config::named(argv[k + 1]);
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
    if (i + 1 >= argc) throw std::invalid_argument(f + " needs a value");
    it->second(f, argv[++i]);
  }
  if (c.embd % c.heads != 0)
    throw std::invalid_argument("--embd " + std::to_string(c.embd) +
                                " does not divide by --heads " + std::to_string(c.heads));
  if (!(t.lr > 0) || !(t.min_lr >= 0) || !(t.weight_decay >= 0) || !(t.max_grad_norm >= 0))
    throw std::invalid_argument("--lr must be > 0 and --min-lr, --wd, --clip >= 0");
  return r;
}

}  // namespace gpt
