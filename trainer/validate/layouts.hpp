// The layouts `strata-gpt validate` trains: named like "tp2.sp.pp2.1f1b.dp2.zero1", parsed from
// --layouts or enumerated from the world size. Every layout of one run uses micro-batches of the
// same size (each gets m = M * tp * cp * pp, so ep * dp * m = ranks * M), which makes one
// reference run on one rank the reference of them all.
#pragma once

#include <string>
#include <vector>

#include "train/gpt_trainer.hpp"

namespace gpt {

/// One layout from its name: tokens joined by '.', any order: tpN, ppN, epN, cpN, dpN (checked
/// against the ranks), p2p | a2a (context parallelism's attention, p2p by default), sp, gpipe |
/// 1f1b | interleaved, vN (virtual stages; interleaved defaults to 2), zeroN (ZeRO stage),
/// recompute; "dp" alone is plain data parallelism. Everything else comes from `base`. Throws
/// std::invalid_argument naming the token or the check that failed.
TrainOptions parse_layout(const std::string& name, const TrainOptions& base, int ranks);
/// The same tokens, checked only against the ranks: base's micro-batches kept as they are, and
/// check_layout left to the caller (strata-plan).
TrainOptions layout_from_name(const std::string& name, const TrainOptions& base, int ranks);

/// The layouts of a validate run: `names` (comma-separated) parsed, or when empty every layout
/// `ranks` allow: DP and ZeRO-1/2/3; each tp (with and without sp); each pp under each schedule;
/// tp x pp; ZeRO on the dp group of a 3D layout; cp (ring and all-to-all), tp2.cp2, cp2.pp2 and
/// cp2 with ZeRO-3;
/// with experts, each ep (with ZeRO-3 beside it
/// where dp > 1, with pp2 and with tp2). Each starts from `base`. Candidates the model
/// cannot hold are left out of the default list; an explicit one that does not fit throws.
std::vector<TrainOptions> validate_layouts(const std::string& names, const TrainOptions& base,
                                           int ranks);

}  // namespace gpt
