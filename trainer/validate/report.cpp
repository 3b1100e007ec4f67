// The certification report: README.md built section by section (summary, inventory, layouts,
// numerics, provenance) around the pictures of report_svg.cpp, then written file by file.
#include "validate/report.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "validate/report_format.hpp"
#include "validate/report_svg.hpp"

namespace gpt {

namespace {

using namespace rep;

// ---- Markdown.

const char* yes_no(bool b) { return b ? "yes" : "**no**"; }
const char* result(bool pass) { return pass ? "pass" : "**FAIL**"; }

// A measured byte count next to its formula: equal ones plain, different ones bold.
std::string measured(double v, bool equal) { return equal ? exact(v) : "**" + exact(v) + "**"; }

std::string summary_md(const Report& r) {
  const size_t failed = failed_layouts(r);
  std::string o = "# " + md(r.title) + "\n\n";
  if (report_passes(r)) {
    o += "**PASS**: all " + std::to_string(r.layouts.size()) + " layouts passed: losses within " +
         rel_diff(r.tolerance) + " of one rank's, gradient norms within " +
         rel_diff(r.grad_norm_tolerance) +
         ", replicas bit-identical, traffic and memory equal to their formulas, "
         "bandwidth as the topology promises.\n\n";
  } else {
    o += "**FAIL**: " + std::to_string(failed) + " of " + std::to_string(r.layouts.size()) +
         " layouts failed";
    if (failed == 0) o += " (the run itself was marked failed)";
    o += ".\n\n";
    for (const ReportLayout& l : r.layouts) {
      const std::vector<std::string> why = failure_reasons(l, r);
      if (why.empty()) continue;
      o += "- **" + md(l.name) + "**: ";
      for (size_t i = 0; i < why.size(); ++i) o += (i ? "; " : "") + md(why[i]);
      o += "\n";
    }
    o += "\n";
  }
  if (!r.model.empty()) o += md(r.model) + "; ";
  o += std::to_string(r.ranks) + " ranks, " + std::to_string(r.steps) + " steps, global batch " +
       std::to_string(r.global_batch) + ".\n\n## Summary\n\n";
  o += "Each layout trains the same steps from the same initialisation as one rank alone "
       "(the reference) and must give its losses.\n\n";
  o += "| layout | result | max rel. loss diff | bit-identical | replicas identical | step ms | "
       "worst bubble | traffic/memory = formula |\n";
  o += "|---|---|--:|---|---|--:|--:|---|\n";
  o += "| reference (1 rank) | - | - | - | - | " + ms(r.reference_step_ms) + " | - | - |\n";
  for (const ReportLayout& l : r.layouts) {
    o += "| " + md(l.name) + " | " + result(l.pass) + " | " + rel_diff(l.max_rel_diff) + " | " +
         (l.bit_identical ? "yes" : "no") + " | " + yes_no(l.replicas_identical) + " | " +
         ms(l.step_ms) + " | " + (l.stages.empty() ? "-" : percent(worst_bubble(l))) + " | " +
         yes_no(l.formulas_match) + " |\n";
  }
  return o + "\n";
}

std::string inventory_md(const Report& r) {
  std::string o =
      "## Inventory\n\n| node | ranks | CPU | cores | hardware threads |\n"
      "|---|---|---|--:|--:|\n";
  auto known = [](int v) { return v > 0 ? std::to_string(v) : std::string("-"); };
  for (const ReportNode& n : placed_nodes(r, {}))
    o += "| " + md(n.name) + " | " + rank_set(n.ranks) + " | " +
         (n.cpu_model.empty() ? std::string("-") : md(n.cpu_model)) + " | " + known(n.cores) +
         " | " + known(n.pus) + " |\n";
  o += "\nLink classes between rank pairs: the topology's estimate for each (SHM: two processes "
       "of one host, through its memory), and what a send/recv of 4 MiB each way between the "
       "example pair moved, one direction:\n\n";
  o += "| class | estimate GB/s | measured GB/s | latency us | example pair | pairs |\n"
       "|---|--:|--:|--:|---|--:|\n";
  for (const ReportLink& l : r.links)
    o += "| " + md(l.cls) + " | " + gbs(l.bandwidth_gbs) + " | " +
         (l.measured_gbs < 0 ? std::string("-") : gbs(l.measured_gbs)) + " | " +
         general(l.latency_us, 3) + " | " + std::to_string(l.example_a) + " - " +
         std::to_string(l.example_b) + " | " + std::to_string(l.pairs) + " |\n";
  if (r.links.empty()) o += "| (none reported) | - | - | - | - | - |\n";
  return o + "\n![inventory](inventory.svg)\n\n";
}

std::string layout_md(const Report& r, const ReportLayout& l, size_t index,
                      const std::string& svg) {
  std::string o = "### " + std::to_string(index + 1) + ". " + md(l.name) + ": " +
                  (l.pass ? "pass" : "FAIL") + "\n\n";
  o += "tp " + std::to_string(l.tp) + (l.sp ? " (sequence parallel)" : "") + ", pp " +
       std::to_string(l.pp);
  if (!l.schedule.empty())
    o += " (" + md(l.schedule) + " schedule, " +
         count_of(l.virtual_stages, "virtual stage", "virtual stages") + " per rank)";
  if (l.cp > 1) o += ", cp " + std::to_string(l.cp) + " (" + md(l.cp_comm) + ")";
  if (l.ep > 1) o += ", ep " + std::to_string(l.ep);
  o += ", dp " + std::to_string(l.dp) + ", ZeRO stage " + std::to_string(l.zero_stage) + ", " +
       count_of(l.micro_batches, "micro-batch", "micro-batches") + ".\n\n";
  for (const std::string& why : failure_reasons(l, r)) o += "- fails: " + md(why) + "\n";
  if (!l.pass) o += "\n";

  o += "Mesh: every group's world ranks.\n\n| dim | groups | ranks |\n|---|--:|---|\n";
  for (const ReportGroup& d : l.groups) {
    o += "| " + md(d.dim) + " | " + std::to_string(d.groups.size()) + " |";
    for (const auto& g : d.groups) o += ' ' + rank_set(g);
    o += " |\n";
  }
  o += "\n![mesh of " + md(l.name) + "](" + svg + ")\n\n";

  o += "Bandwidth probes (bus bandwidth in the nccl-tests sense):\n\n";
  o += "| dim | group | collective | size | busbw GB/s | link class | promise GB/s | threshold | "
       "result |\n|---|---|---|--:|--:|---|--:|---|---|\n";
  for (const ReportBandwidth& b : l.bandwidth)
    o += "| " + md(b.dim) + " | " + rank_set(b.ranks) + " | " + md(b.collective) + " | " +
         size_text(b.bytes) + " | " + gbs(b.busbw_gbs) + " | " + md(b.link_class) + " | " +
         gbs(b.promise_gbs) + " | " + threshold_text(b) + " | " + result(b.pass) + " |\n";
  if (l.bandwidth.empty()) o += "| - | - | - | - | - | - | - | - | - |\n";

  o += "\nPer stage, one step: pipeline bubble and traffic in bytes, measured next to the "
       "formula (a different figure is bold).\n\n";
  o += "| stage | bubble | ideal | tp bytes | formula | pp bytes | formula | dp bus bytes | "
       "formula |";
  if (l.ep > 1) o += " ep a2a bytes | ep bus bytes | formula |";
  if (l.cp > 1) o += " cp bytes | formula |";
  o += "\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|";
  if (l.ep > 1) o += "--:|--:|--:|";
  if (l.cp > 1) o += "--:|--:|";
  o += "\n";
  for (const ReportStage& s : l.stages) {
    o += "| " + std::to_string(s.stage) + " | " + percent(s.bubble) + " | " +
         percent(s.ideal_bubble) + " | " +
         measured(s.tp_bytes, same(s.tp_bytes, s.tp_bytes_formula)) + " | " +
         exact(s.tp_bytes_formula) + " | " +
         measured(s.pp_bytes, same(s.pp_bytes, s.pp_bytes_formula)) + " | " +
         exact(s.pp_bytes_formula) + " | " +
         measured(s.dp_bus_bytes, same(s.dp_bus_bytes, s.dp_bus_bytes_formula)) + " | " +
         exact(s.dp_bus_bytes_formula) + " |";
    if (l.ep > 1)
      o += " " + exact(s.ep_bytes) + " | " +
           measured(s.ep_bus_bytes, same(s.ep_bus_bytes, s.ep_bus_bytes_formula)) + " | " +
           exact(s.ep_bus_bytes_formula) + " |";
    if (l.cp > 1)
      o += " " + measured(s.cp_bytes, same(s.cp_bytes, s.cp_bytes_formula)) + " | " +
           exact(s.cp_bytes_formula) + " |";
    o += "\n";
  }
  o += "\nPer stage, memory of one rank in bytes (exact), measured next to the formula:\n\n";
  o += "| stage | params | formula | grads | formula | optimizer | formula | activations (peak) | "
       "= formula |\n|--:|--:|--:|--:|--:|--:|--:|--:|---|\n";
  for (const ReportStage& s : l.stages) {
    auto cell = [](size_t m, size_t f) {
      return measured(double(m), m == f) + " | " + std::to_string(f);
    };
    o += "| " + std::to_string(s.stage) + " | " + cell(s.param_bytes, s.param_bytes_formula) +
         " | " + cell(s.grad_bytes, s.grad_bytes_formula) + " | " +
         cell(s.optimizer_bytes, s.optimizer_bytes_formula) + " | " +
         std::to_string(s.activation_bytes) + " | " + yes_no(stage_matches(s)) + " |\n";
  }
  return o + "\n";
}

std::string numerics_md(const Report& r) {
  std::string o = "## Numerics\n\n";
  o += "Tolerance: max over steps of |loss - reference| / reference <= " + rel_diff(r.tolerance) +
       "; of the gradient norm before clipping <= " + rel_diff(r.grad_norm_tolerance) +
       " (rounding of sums reordered over the steps).\n\n| layout | max rel. diff | "
       "grad norm rel. diff | within tolerance | bit-identical | replicas identical | final loss "
       "| result |\n|---|--:|--:|---|---|---|--:|---|\n";
  auto final_loss = [](const std::vector<float>& v) {
    return v.empty() ? std::string("-") : exact(v.back());
  };
  o += "| reference (1 rank) | - | - | - | - | - | " + final_loss(r.reference_losses) + " | - |\n";
  for (const ReportLayout& l : r.layouts)
    o += "| " + md(l.name) + " | " + rel_diff(l.max_rel_diff) + " | " +
         rel_diff(l.grad_norm_rel_diff) + " | " +
         yes_no(l.max_rel_diff <= r.tolerance && l.grad_norm_rel_diff <= r.grad_norm_tolerance) +
         " | " + (l.bit_identical ? "yes" : "no") + " | " + yes_no(l.replicas_identical) + " | " +
         final_loss(l.losses) + " | " + result(l.pass) + " |\n";
  o += "\nThe curves should lie on one another:\n\n![losses](losses.svg)\n\n";
  o += "Pipeline bubble per layout and stage against the schedule's ideal:\n\n"
       "![bubble](bubble.svg)\n\n";
  return o;
}

std::string provenance_md(const Report& r) {
  std::string o = "## Provenance\n\n| | |\n|---|---|\n";
  const std::pair<const char*, std::string> rows[] = {
      {"Strata version", r.strata_version},
      {"commit", r.commit},
      {"compiler", r.compiler},
      {"date (UTC)", r.date_utc},
      {"wall time", fixed(r.wall_seconds, 1) + " s"},
      {"kernel", r.kernel},
      {"seed", std::to_string(r.seed)},
      {"tolerance", rel_diff(r.tolerance)},
      {"gradient norm tolerance", rel_diff(r.grad_norm_tolerance)},
      {"model", r.model},
      {"ranks", std::to_string(r.ranks)},
      {"steps", std::to_string(r.steps)},
      {"global batch", std::to_string(r.global_batch)}};
  for (const auto& [k, v] : rows) o += std::string("| ") + k + " | " + md(v) + " |\n";
  for (const auto& [k, v] : r.libraries) o += "| " + md(k) + " | " + md(v) + " |\n";
  o += "\nEnvironment (variables that change Strata's, UCX's, BLAS's or OpenMP's behaviour):\n\n";
  if (r.environment.empty()) o += "none set.\n";
  for (const auto& [k, v] : r.environment) o += "- " + md(k + "=" + v) + "\n";
  const std::string fence = fence_for(r.command_line);
  return o + "\nCommand line:\n\n" + fence + "\n" + r.command_line + "\n" + fence + "\n";
}

// ---- Files.

std::string file_safe(const std::string& s) {
  std::string o;
  for (char c : s.substr(0, 60))
    o += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_';
  return o;
}

// Through a temporary and a rename, so a reader never sees half a file.
void write_file(const std::filesystem::path& path, const std::string& content) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (f) f << content;
    if (f) f.close();
    if (!f) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw std::runtime_error("report: cannot write " + path.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error("report: cannot write " + path.string() + ": " + ec.message());
  }
}

}  // namespace

std::vector<std::string> write_report(const std::string& dir, const Report& r) {
  if (dir.empty()) throw std::runtime_error("report: empty directory name");
  const std::filesystem::path root(dir);
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) throw std::runtime_error("report: cannot create " + dir + ": " + ec.message());

  std::vector<std::string> written;
  auto put = [&](const std::string& name, const std::string& content) {
    write_file(root / name, content);
    written.push_back((root / name).string());
  };
  const int digits = std::max<int>(2, std::to_string(r.layouts.size()).size());
  std::string layouts_md = "## Layouts\n\n";
  for (size_t i = 0; i < r.layouts.size(); ++i) {
    std::string n = std::to_string(i + 1);
    n.insert(0, digits - n.size(), '0');
    const std::string svg = "mesh-" + n + "-" + file_safe(r.layouts[i].name) + ".svg";
    put(svg, mesh_svg(r, r.layouts[i]));
    layouts_md += layout_md(r, r.layouts[i], i, svg);
  }
  put("inventory.svg", inventory_svg(r));
  put("losses.svg", losses_svg(r));
  put("bubble.svg", bubble_svg(r));
  put("README.md",
      summary_md(r) + inventory_md(r) + layouts_md + numerics_md(r) + provenance_md(r));
  return written;
}

}  // namespace gpt
