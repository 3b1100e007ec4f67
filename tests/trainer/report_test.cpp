// The certification report writer: a hand-made Report (2 nodes, 2 layouts, one failing a
// bandwidth probe) written to a scratch directory and read back element by element: files,
// verdict, sections, exact cells, well-formed and escaped SVG, determinism, errors.
#include "trainer/validate/report.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

// A scratch directory removed at the end of the test.
struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/strata_report_XXXXXX";
    if (!mkdtemp(name)) throw std::runtime_error("mkdtemp failed");
    path = name;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

gpt::ReportStage stage(int s, double bubble, double ideal) {
  gpt::ReportStage st;
  st.stage = s;
  st.bubble = bubble, st.ideal_bubble = ideal;
  st.tp_bytes = st.tp_bytes_formula = 1572864;
  st.pp_bytes = st.pp_bytes_formula = s == 0 ? 65536 : 32768;
  st.dp_bus_bytes = st.dp_bus_bytes_formula = 106944;
  st.param_bytes = st.param_bytes_formula = 213888;
  st.grad_bytes = st.grad_bytes_formula = 213888;
  st.optimizer_bytes = st.optimizer_bytes_formula = 213888;
  st.activation_bytes = 1048576 + s;
  return st;
}

gpt::ReportBandwidth probe(const std::string& dim, std::vector<int> ranks, double busbw,
                           const std::string& cls, double promise) {
  gpt::ReportBandwidth b;
  b.dim = dim, b.collective = dim == "pp" ? "send/recv" : "all_reduce";
  b.ranks = std::move(ranks);
  b.bytes = 1 << 20, b.busbw_gbs = busbw;
  b.link_class = cls, b.promise_gbs = promise, b.threshold = 0.05;
  b.pass = busbw >= b.threshold * promise;
  return b;
}

std::vector<float> curve(float wobble) {
  std::vector<float> v;
  for (int s = 0; s < 6; ++s) v.push_back(4.17f - 0.2f * s + wobble);
  return v;
}

// 8 ranks on two nodes; tp2.pp2.1f1b.dp2 passes, tp2.dp4.zero1 fails its tp probe on 0,1.
gpt::Report make_report() {
  gpt::Report r;
  r.title = "strata-gpt validate: tiny, 8 ranks";
  r.strata_version = "0.9.0", r.commit = "abc1234", r.compiler = "GCC 12.2.0";
  r.date_utc = "2025-01-02T03:04:05Z";
  r.command_line = "strata-run -n 8 strata-gpt validate --config tiny --report out";
  r.seed = 1337, r.model = "L 4, H 4, C 32, T 16, V 65, 53472 parameters";
  r.ranks = 8, r.steps = 6, r.global_batch = 16, r.tolerance = 1e-5;
  r.grad_norm_tolerance = 1.2e-3;
  r.nodes = {{"node-a", {0, 1, 2, 3}, "AMD EPYC 7B13 64-Core Processor", 2, 4},
             {"node-b<&>", {4, 5, 6, 7}}};
  r.links = {{"nvlink", 300, 281.5, 2, 0, 1, 12}, {"ib", 12, -1, 5, 0, 4, 16}};
  r.kernel = "Linux 6.1.0-28-amd64", r.wall_seconds = 83.4;
  r.libraries = {{"UCX", "1.13.1"}, {"OpenBLAS", "OpenBLAS 0.3.21 DYNAMIC_ARCH Haswell"}};
  r.environment = {{"STRATA_JOB_TOKEN", "(set; value withheld)"}, {"UCX_TLS", "tcp|self"}};
  r.reference_losses = curve(0);
  r.reference_step_ms = 12.345;

  gpt::ReportLayout a;
  a.name = "tp2.pp2.1f1b.dp2";
  a.tp = 2, a.pp = 2, a.dp = 2, a.zero_stage = 0, a.micro_batches = 4, a.schedule = "1f1b";
  a.groups = {{"tp", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
              {"pp", {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
              {"dp", {{0, 2}, {1, 3}, {4, 6}, {5, 7}}}};
  a.losses = curve(0);
  a.max_rel_diff = 0, a.grad_norm_rel_diff = 4e-6, a.bit_identical = true;
  a.replicas_identical = true;
  a.formulas_match = true, a.step_ms = 7.5;
  a.stages = {stage(0, 0.21, 0.2), stage(1, 0.25, 0.2)};
  a.bandwidth = {probe("tp", {0, 1}, 150, "nvlink", 300), probe("pp", {0, 4}, 10, "ib", 12)};
  a.pass = true;

  gpt::ReportLayout b;
  b.name = "tp2.dp4.zero1";
  b.tp = 2, b.dp = 4, b.zero_stage = 1, b.micro_batches = 1;
  b.groups = {{"tp", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}}, {"dp", {{0, 2, 4, 6}, {1, 3, 5, 7}}}};
  b.losses = curve(0);
  b.losses.back() = 3.1701f;  // shown as the shortest text of the float
  b.max_rel_diff = 3.1e-8, b.grad_norm_rel_diff = 2e-3, b.bit_identical = false;
  b.replicas_identical = true;
  b.formulas_match = true, b.step_ms = 5.25;
  b.stages = {stage(0, 0.02, 0)};
  b.bandwidth = {probe("tp", {0, 1}, 0.4, "ib", 12), probe("dp", {0, 2, 4, 6}, 11, "ib", 12)};
  b.pass = false;

  r.layouts = {a, b};
  r.pass = false;
  return r;
}

gpt::Report passing_report() {
  gpt::Report r = make_report();
  r.layouts[1].bandwidth[0] = probe("tp", {0, 1}, 9.5, "ib", 12);
  r.layouts[1].pass = true;
  r.pass = true;
  return r;
}

std::vector<std::string> expected_files(const std::string& dir) {
  return {dir + "/mesh-01-tp2.pp2.1f1b.dp2.svg",
          dir + "/mesh-02-tp2.dp4.zero1.svg",
          dir + "/inventory.svg",
          dir + "/losses.svg",
          dir + "/bubble.svg",
          dir + "/README.md"};
}

TEST(Report, WritesTheFilesItLists) {
  TempDir t;
  const std::string dir = t.path + "/nested/report";  // parents are created too
  const std::vector<std::string> files = gpt::write_report(dir, make_report());
  EXPECT_EQ(files, expected_files(dir));
  for (const std::string& f : files) {
    EXPECT_TRUE(fs::is_regular_file(f)) << f;
    EXPECT_GT(fs::file_size(f), 100u) << f;
  }
  // Nothing else: no temporaries left behind.
  EXPECT_EQ(size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator())),
            files.size());
}

TEST(Report, FailVerdictNamesTheLayoutAndTheReason) {
  TempDir t;
  gpt::write_report(t.path, make_report());
  const std::string md = read_all(t.path + "/README.md");
  const std::string first_lines = md.substr(0, md.find("## Summary"));
  EXPECT_EQ(md.rfind("# strata-gpt validate: tiny, 8 ranks\n", 0), 0u);
  EXPECT_NE(first_lines.find("**FAIL**: 1 of 2 layouts failed."), std::string::npos) << first_lines;
  EXPECT_NE(first_lines.find("- **tp2.dp4.zero1**: gradient norm differs from the reference: "
                             "max relative difference 2.00e-03 > tolerance 1.20e-03; bandwidth: "
                             "tp all_reduce on ranks {0, 1} reached 0.4 GB/s, needs >= 5% of "
                             "12.0 GB/s (ib)\n"),
            std::string::npos)
      << first_lines;
  EXPECT_EQ(first_lines.find("tp2.pp2.1f1b.dp2"),
            std::string::npos);  // the passing one is not blamed
  EXPECT_EQ(md.find("PASS"), std::string::npos);
}

TEST(Report, SectionsComeInOrder) {
  TempDir t;
  gpt::write_report(t.path, make_report());
  const std::string md = read_all(t.path + "/README.md");
  size_t at = 0;
  for (const char* h :
       {"\n## Summary\n", "\n## Inventory\n", "\n## Layouts\n", "\n### 1. tp2.pp2.1f1b.dp2: pass\n",
        "\n### 2. tp2.dp4.zero1: FAIL\n", "\n## Numerics\n", "\n## Provenance\n"}) {
    const size_t next = md.find(h, at);
    ASSERT_NE(next, std::string::npos) << h;
    at = next + 1;
  }
  // Every picture the text shows is a file of the report.
  for (const char* img : {"](inventory.svg)", "](mesh-01-tp2.pp2.1f1b.dp2.svg)",
                          "](mesh-02-tp2.dp4.zero1.svg)", "](losses.svg)", "](bubble.svg)"})
    EXPECT_EQ(count(md, img), 1u) << img;
}

TEST(Report, CellsHoldTheExactFigures) {
  TempDir t;
  gpt::write_report(t.path, make_report());
  const std::string md = read_all(t.path + "/README.md");
  // Summary rows.
  EXPECT_NE(md.find("| reference (1 rank) | - | - | - | - | 12.35 | - | - |\n"), std::string::npos);
  EXPECT_NE(md.find("| tp2.pp2.1f1b.dp2 | pass | 0 | yes | yes | 7.50 | 25.0% | yes |\n"),
            std::string::npos);
  EXPECT_NE(md.find("| tp2.dp4.zero1 | **FAIL** | 3.10e-08 | no | yes | 5.25 | 2.0% | yes |\n"),
            std::string::npos);
  // Inventory.
  EXPECT_NE(md.find("| node-a | {0, 1, 2, 3} | AMD EPYC 7B13 64-Core Processor | 2 | 4 |\n"),
            std::string::npos);
  EXPECT_NE(md.find("| node-b&lt;&> | {4, 5, 6, 7} | - | - | - |\n"), std::string::npos);
  EXPECT_NE(md.find("| nvlink | 300.0 | 281.5 | 2 | 0 - 1 | 12 |\n"), std::string::npos);
  EXPECT_NE(md.find("| ib | 12.0 | - | 5 | 0 - 4 | 16 |\n"), std::string::npos);
  // Mesh, probes, stages and memory of the layouts.
  EXPECT_NE(md.find("| pp | 4 | {0, 4} {1, 5} {2, 6} {3, 7} |\n"), std::string::npos);
  EXPECT_NE(md.find("| tp | {0, 1} | all_reduce | 1 MiB | 0.4 | ib | 12.0 | >= 5% of 12.0 GB/s | "
                    "**FAIL** |\n"),
            std::string::npos);
  EXPECT_NE(md.find("| pp | {0, 4} | send/recv | 1 MiB | 10.0 | ib | 12.0 | >= 5% of 12.0 GB/s | "
                    "pass |\n"),
            std::string::npos);
  EXPECT_NE(md.find("| 0 | "), std::string::npos);
  EXPECT_NE(md.find(" | 65536 | 65536 | 106944 | 106944 |\n"), std::string::npos);
  EXPECT_NE(md.find("| 1 | 25.0% | 20.0% | 1572864 | 1572864 | 32768 | 32768 | 106944 | "
                    "106944 |\n"),
            std::string::npos);
  EXPECT_NE(
      md.find("| 1 | 213888 | 213888 | 213888 | 213888 | 213888 | 213888 | 1048577 | yes |\n"),
      std::string::npos);
  // Numerics and provenance.
  EXPECT_NE(md.find("| tp2.pp2.1f1b.dp2 | 0 | 4.00e-06 | yes | yes | yes | "), std::string::npos);
  EXPECT_NE(
      md.find("| tp2.dp4.zero1 | 3.10e-08 | 2.00e-03 | **no** | no | yes | 3.1701 | **FAIL** |\n"),
      std::string::npos)
      << md.substr(md.find("## Numerics"), 900);
  EXPECT_NE(md.find("| seed | 1337 |\n"), std::string::npos);
  EXPECT_NE(md.find("| tolerance | 1.00e-05 |\n"), std::string::npos);
  EXPECT_NE(md.find("| gradient norm tolerance | 1.20e-03 |\n"), std::string::npos);
  EXPECT_NE(md.find("| wall time | 83.4 s |\n"), std::string::npos);
  EXPECT_NE(md.find("| kernel | Linux 6.1.0-28-amd64 |\n"), std::string::npos);
  EXPECT_NE(md.find("| UCX | 1.13.1 |\n| OpenBLAS | OpenBLAS 0.3.21 DYNAMIC_ARCH Haswell |\n"),
            std::string::npos);
  EXPECT_NE(md.find("- STRATA_JOB_TOKEN=(set; value withheld)\n- UCX_TLS=tcp\\|self\n"),
            std::string::npos);
  EXPECT_NE(md.find("```\nstrata-run -n 8 strata-gpt validate --config tiny --report out\n```\n"),
            std::string::npos);
}

TEST(Report, MemoryDifferingFromItsFormulaIsBold) {
  TempDir t;
  gpt::Report r = make_report();
  r.layouts[0].stages[1].grad_bytes = 213889;
  r.layouts[0].formulas_match = false;
  r.layouts[0].pass = false;
  gpt::write_report(t.path, r);
  const std::string md = read_all(t.path + "/README.md");
  EXPECT_NE(md.find("| 1 | 213888 | 213888 | **213889** | 213888 | 213888 | 213888 | 1048577 | "
                    "**no** |\n"),
            std::string::npos);
  EXPECT_NE(md.find("**FAIL**: 2 of 2 layouts failed."), std::string::npos);
  EXPECT_NE(md.find("- **tp2.pp2.1f1b.dp2**: traffic or memory differs from its formula\n"),
            std::string::npos);
}

// Well-formed enough for a browser: one root, balanced elements, every '<' a tag and every
// '&' an entity, so text such as "node-b<&>" arrived escaped.
void expect_well_formed_svg(const std::string& path) {
  const std::string s = read_all(path);
  SCOPED_TRACE(path);
  ASSERT_EQ(s.rfind("<svg xmlns='http://www.w3.org/2000/svg'", 0), 0u);
  ASSERT_GE(s.size(), 7u);
  EXPECT_EQ(s.substr(s.size() - 7), "</svg>\n");
  EXPECT_EQ(count(s, "<svg"), 1u);
  EXPECT_EQ(count(s, "<text"), count(s, "</text>"));
  EXPECT_EQ(count(s, "<g>"), count(s, "</g>"));
  EXPECT_EQ(count(s, "<title>"), count(s, "</title>"));
  for (size_t i = s.find('<'); i != std::string::npos; i = s.find('<', i + 1))
    EXPECT_TRUE(std::isalpha(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '/')
        << "bare '<' at " << i << ": " << s.substr(i, 20);
  for (size_t i = s.find('&'); i != std::string::npos; i = s.find('&', i + 1)) {
    const std::string e = s.substr(i, 6);
    EXPECT_TRUE(e.rfind("&amp;", 0) == 0 || e.rfind("&lt;", 0) == 0 || e.rfind("&gt;", 0) == 0 ||
                e.rfind("&quot;", 0) == 0 || e.rfind("&apos;", 0) == 0)
        << "bare '&' at " << i << ": " << e;
  }
}

TEST(Report, SvgsAreWellFormedAndEscaped) {
  TempDir t;
  const std::vector<std::string> files = gpt::write_report(t.path, make_report());
  for (const std::string& f : files)
    if (f.size() > 4 && f.substr(f.size() - 4) == ".svg") expect_well_formed_svg(f);
  const std::string inventory = read_all(t.path + "/inventory.svg");
  EXPECT_NE(inventory.find("node-b&lt;&amp;&gt; (4 ranks)"), std::string::npos);
  EXPECT_NE(inventory.find("ib: 12.0 GB/s, 5 us, 16 pairs, e.g. ranks 0-4"), std::string::npos);
  // The 3D mesh: four tp groups outlined, stages labelled; the 2D one has no stages.
  const std::string mesh1 = read_all(t.path + "/mesh-01-tp2.pp2.1f1b.dp2.svg");
  EXPECT_EQ(count(mesh1, "stroke-width='2.5'"), 4u);
  EXPECT_EQ(count(mesh1, ">stage 1</text>"), 4u + 1u);  // four ranks and the legend
  const std::string mesh2 = read_all(t.path + "/mesh-02-tp2.dp4.zero1.svg");
  EXPECT_EQ(count(mesh2, "stroke-width='2.5'"), 4u);
  EXPECT_EQ(count(mesh2, ">stage "), 0u);
  // One curve each for the reference and the two layouts; one bar per stage.
  EXPECT_EQ(count(read_all(t.path + "/losses.svg"), "<polyline"), 3u);
  EXPECT_EQ(count(read_all(t.path + "/bubble.svg"), "</title><rect"), 3u);
}

TEST(Report, UserTextIsEscapedInMarkdownAndFileNames) {
  TempDir t;
  gpt::Report r = make_report();
  r.layouts[0].name = "odd|name<b>/x";
  r.command_line = "run --sep '```'";
  r.layouts[1].losses[2] = std::numeric_limits<float>::quiet_NaN();  // a diverged step
  const std::vector<std::string> files = gpt::write_report(t.path, r);
  EXPECT_EQ(files[0], t.path + "/mesh-01-odd_name_b__x.svg");
  const std::string md = read_all(t.path + "/README.md");
  EXPECT_NE(md.find("| odd\\|name&lt;b>/x | pass |"), std::string::npos);
  EXPECT_EQ(md.find("odd|name"), std::string::npos);
  EXPECT_NE(md.find("\n````\nrun --sep '```'\n````\n"), std::string::npos);
  for (const std::string& f : files)
    if (f.substr(f.size() - 4) == ".svg") expect_well_formed_svg(f);
  // The NaN breaks that layout's curve in two instead of poisoning it.
  const std::string losses = read_all(t.path + "/losses.svg");
  EXPECT_EQ(count(losses, "<polyline"), 4u);
  EXPECT_EQ(losses.find("nan"), std::string::npos);
}

TEST(Report, PassingReportSaysPass) {
  TempDir t;
  gpt::write_report(t.path, passing_report());
  const std::string md = read_all(t.path + "/README.md");
  EXPECT_NE(md.find("\n**PASS**: all 2 layouts passed"), std::string::npos);
  EXPECT_NE(md.find("traffic and memory equal to their formulas, bandwidth as the topology "
                    "promises.\n"),
            std::string::npos);
  EXPECT_EQ(md.find("FAIL"), std::string::npos);
  // A run marked failed is not a pass even when every layout passed.
  gpt::Report r = passing_report();
  r.pass = false;
  gpt::write_report(t.path, r);
  EXPECT_NE(read_all(t.path + "/README.md").find("**FAIL**: 0 of 2 layouts failed (the run itself"),
            std::string::npos);
}

TEST(Report, SameInputGivesTheSameBytes) {
  TempDir t;
  const gpt::Report r = make_report();
  const std::vector<std::string> a = gpt::write_report(t.path + "/a", r);
  const std::vector<std::string> b = gpt::write_report(t.path + "/b", r);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(fs::path(a[i]).filename(), fs::path(b[i]).filename());
    EXPECT_EQ(read_all(a[i]), read_all(b[i])) << a[i];
  }
  // Rewriting in place gives the same files again.
  const std::string before = read_all(a.back());
  gpt::write_report(t.path + "/a", r);
  EXPECT_EQ(read_all(a.back()), before);
}

TEST(Report, UnwritableDirectoryThrowsNamingThePath) {
  const std::string dir = "/proc/strata_report_test/out";
  try {
    gpt::write_report(dir, make_report());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
  // A directory that exists but refuses new files (even to root): the file's path is named.
  try {
    gpt::write_report("/proc/self", make_report());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/self/mesh-01-tp2.pp2.1f1b.dp2.svg"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
