// The certification report's shared pieces (internal to trainer/report*.cpp): numbers written the
// same way everywhere (std::to_chars, so no locale changes a byte), text escaped for Markdown and
// SVG, and the verdicts read back from a Report's fields.
#pragma once

#include <charconv>
#include <string>
#include <vector>

#include "validate/report.hpp"

namespace gpt::rep {

std::string chars(double v, std::chars_format f, int precision);
std::string fixed(double v, int decimals);
std::string general(double v, int digits);
std::string exact(double v);
std::string exact(float v);
std::string count_of(int n, const char* one, const char* many);
std::string percent(double v);
std::string gbs(double v);
std::string ms(double v);
std::string rel_diff(double v);
std::string size_text(double bytes);
std::string threshold_text(const ReportBandwidth& b);
std::string rank_set(const std::vector<int>& ranks);
/// Equal within 1e-9 relative (validate's rule for traffic against its formula).
bool same(double a, double b);
bool stage_matches(const ReportStage& s);
double worst_bubble(const ReportLayout& l);
/// Escaped for a Markdown table cell / for SVG text.
std::string md(const std::string& s);
std::string xml(const std::string& s);
std::string fence_for(const std::string& s);
std::vector<std::string> failure_reasons(const ReportLayout& l, const Report& r);
size_t failed_layouts(const Report& r);
bool report_passes(const Report& r);
/// The report's nodes, plus one "(no node listed)" holding `more` ranks no node lists.
std::vector<ReportNode> placed_nodes(const Report& r, const std::vector<int>& more);

}  // namespace gpt::rep
