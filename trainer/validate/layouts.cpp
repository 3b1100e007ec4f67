#include "validate/layouts.hpp"

#include <set>
#include <sstream>
#include <stdexcept>

namespace gpt {

namespace {

// The number after `prefix` in `token`, or -1 when the token is not prefix + digits.
int numbered(const std::string& token, const std::string& prefix) {
  if (token.size() <= prefix.size() || token.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string digits = token.substr(prefix.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 6) return -1;
  return std::stoi(digits);
}

}  // namespace

TrainOptions layout_from_name(const std::string& name, const TrainOptions& base, int ranks) {
  TrainOptions o = base;
  o.tp = o.pp = o.ep = o.cp = 1, o.sp = false, o.stage = 0, o.virtual_stages = 1;
  o.cp_comm = CpComm::p2p;
  o.schedule = pp::Schedule::one_f_one_b;
  int dp = -1;
  std::set<std::string> seen;  // each kind of part at most once: "tp1.tp2" is a typo, not tp2
  auto once = [&](const std::string& kind, const std::string& tok) {
    if (!seen.insert(kind).second)
      throw std::invalid_argument("layout '" + name + "': '" + tok + "' repeats its " + kind);
  };
  std::stringstream in(name);
  for (std::string tok; std::getline(in, tok, '.');) {
    int n;
    for (const char* sized : {"tp", "pp", "ep", "cp", "dp", "v"}) {
      if (numbered(tok, sized) == 0)
        throw std::invalid_argument("layout '" + name + "': '" + tok + "' has size 0");
    }
    const size_t digits = tok.find_first_of("0123456789");
    const bool comm = tok == "p2p" || tok == "a2a";
    const bool schedule = tok == "gpipe" || tok == "1f1b" || tok == "interleaved";
    once(comm ? "cp communication" : schedule ? "schedule" : tok.substr(0, digits), tok);
    if (tok == "dp") continue;
    if ((n = numbered(tok, "tp")) > 0)
      o.tp = n;
    else if ((n = numbered(tok, "pp")) > 0)
      o.pp = n;
    else if ((n = numbered(tok, "ep")) > 0)
      o.ep = n;
    else if ((n = numbered(tok, "cp")) > 0)
      o.cp = n;
    else if (tok == "p2p" || tok == "a2a")
      o.cp_comm = parse_cp_comm(tok);
    else if ((n = numbered(tok, "dp")) > 0)
      dp = n;
    else if ((n = numbered(tok, "zero")) >= 0 && n <= 3)
      o.stage = n;
    else if ((n = numbered(tok, "v")) > 0)
      o.virtual_stages = n;
    else if (tok == "sp")
      o.sp = true;
    else if (tok == "recompute")
      o.recompute = true;
    else if (tok == "gpipe" || tok == "1f1b" || tok == "interleaved")
      o.schedule = pp::parse_schedule(tok);
    else
      throw std::invalid_argument("layout '" + name + "': unknown part '" + tok + "'");
  }
  if (o.schedule == pp::Schedule::interleaved && !seen.count("v")) o.virtual_stages = 2;
  const int split = o.tp * o.cp * o.ep * o.pp;
  if (dp > 0 && dp * split != ranks)
    throw std::invalid_argument("layout '" + name +
                                "': tp*cp*ep*pp*dp = " + std::to_string(dp * split) +
                                " but there are " + std::to_string(ranks) + " ranks");
  return o;
}

TrainOptions parse_layout(const std::string& name, const TrainOptions& base, int ranks) {
  TrainOptions o = layout_from_name(name, base, ranks);
  // cp ranks read the same sequences: they take more micro-batches, as tp and pp ranks do.
  o.micro_batches = base.micro_batches * o.tp * o.cp * o.pp;
  try {
    check_layout(o, ranks);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("layout '" + name + "': " + e.what());
  }
  return o;
}

std::vector<TrainOptions> validate_layouts(const std::string& layouts, const TrainOptions& base,
                                           int ranks) {
  std::vector<TrainOptions> out;
  if (!layouts.empty()) {
    std::stringstream in(layouts);
    for (std::string name; std::getline(in, name, ',');) {
      if (name.empty())
        throw std::invalid_argument("--layouts '" + layouts + "' has an empty entry");
      out.push_back(parse_layout(name, base, ranks));
    }
    if (out.empty()) throw std::invalid_argument("--layouts '" + layouts + "' names no layout");
    return out;
  }
  std::vector<std::string> names = {"dp", "dp.zero1", "dp.zero2", "dp.zero3"};
  for (int tp = 2; tp <= ranks; ++tp) {
    if (ranks % tp) continue;
    names.push_back("tp" + std::to_string(tp));
    names.push_back("tp" + std::to_string(tp) + ".sp");
  }
  for (int pp = 2; pp <= ranks; ++pp) {
    if (ranks % pp) continue;
    for (const char* s : {"gpipe", "1f1b", "interleaved"})
      names.push_back("pp" + std::to_string(pp) + "." + s);
  }
  if (ranks % 4 == 0) {
    names.push_back("tp2.pp2");
    names.push_back("tp2.sp.pp2");
    if (ranks >= 8) names.push_back("tp2.pp2.zero1");
  }
  if (ranks % 2 == 0 && ranks >= 4) names.push_back("tp2.zero3");
  // Context parallelism, ring and all-to-all, on every size; beside tp and pp on 4 ranks.
  for (int cp = 2; cp <= ranks; ++cp)
    for (const char* comm : {"", ".a2a"}) names.push_back("cp" + std::to_string(cp) + comm);
  if (ranks % 4 == 0) {
    names.push_back("tp2.cp2");
    names.push_back("cp2.pp2");
    names.push_back("cp2.zero3");
  }
  if (base.model.experts > 0)  // expert parallelism over every size the experts and ranks allow
    for (int ep = 2; ep <= ranks; ++ep) {
      names.push_back("ep" + std::to_string(ep));
      if (ranks / ep > 1) names.push_back("ep" + std::to_string(ep) + ".zero3");
      if (ranks % (2 * ep) == 0) {
        names.push_back("ep" + std::to_string(ep) + ".pp2");
        names.push_back("tp2.ep" + std::to_string(ep));
        names.push_back("cp2.ep" + std::to_string(ep));
      }
    }
  for (const std::string& n : names) {
    try {
      out.push_back(parse_layout(n, base, ranks));
    } catch (const std::invalid_argument&) {  // this model or world cannot hold it
    }
  }
  return out;
}

}  // namespace gpt
