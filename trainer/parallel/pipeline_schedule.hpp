// Pipeline-parallel schedules: which forward and backward passes a pipeline rank runs in one
// optimizer step, and in which order (GPipe, 1F1B, Megatron's interleaved 1F1B). Pure arithmetic
// with no communication, so that the order can be tested for deadlock, memory and bubble apart from
// the executor that walks it (receive before a pass, send after it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpt::pp {

/// gpipe: all forwards, then all backwards. one_f_one_b: PipeDream-flush (Megatron's default).
/// interleaved: Megatron's interleaved 1F1B over v model chunks per rank.
enum class Schedule { gpipe, one_f_one_b, interleaved };

/// "gpipe" | "1f1b" | "interleaved"; std::invalid_argument naming the bad value and the known ones.
Schedule parse_schedule(const std::string& name);
std::string_view schedule_name(Schedule s);

/// One pass of one micro-batch through one model chunk of this rank.
struct Action {
  enum Kind : uint8_t { forward, backward } kind;
  int micro;  ///< micro-batch, 0..m-1
  int chunk;  ///< model chunk on this rank, 0..v-1 (always 0 unless interleaved)
  bool operator==(const Action&) const = default;
};

/// The virtual stage chunk `chunk` of rank `rank` holds. Megatron's interleaving: rank r holds
/// virtual stages r, r + p, r + 2p, ...; micro-batch k's forward goes through virtual stages
/// 0..p*v-1 in order, its backward in reverse.
inline int virtual_stage(int p, int rank, int chunk) { return chunk * p + rank; }

/// Throws std::invalid_argument (one line, naming the numbers) unless p, m, v >= 1 and:
/// v > 1 only with interleaved; interleaved needs v >= 2 (one chunk is 1f1b: say so rather than
/// run a 1F1B with twice the warm-up), p >= 2 (one rank has no bubble to shrink, and every hop
/// would be a send to itself) and m a multiple of p (Megatron's groups of p micro-batches).
void check_schedule(Schedule s, int p, int m, int v);

/// The ordered passes rank `rank` (0..p-1) runs in one step: each (micro, chunk) forward and
/// backward once; on each chunk, forwards in ascending micro order and backwards too. Calls
/// check_schedule first; throws std::invalid_argument for a rank outside 0..p-1.
std::vector<Action> schedule(Schedule s, int p, int rank, int m, int v);

/// Ideal bubble share of a step (uniform pass costs, free communication): (p-1)/(m+p-1) for gpipe
/// and 1f1b, (p-1)/(v*m+p-1) interleaved. Calls check_schedule first.
double ideal_bubble(Schedule s, int p, int m, int v);

/// Most activations rank `rank` holds at once, counted per (micro, chunk): forwards run whose
/// backward has not. Taken from schedule(): gpipe m, 1f1b min(p - rank, m), interleaved
/// min(warm-up + 1, m*v) with Megatron's warm-up (p - rank - 1) * 2 + (v - 1) * p.
int peak_in_flight(Schedule s, int p, int rank, int m, int v);

/// The same, of chunk `chunk` alone: the activation slots that chunk's Model needs. The micro-
/// batches a chunk holds at once are consecutive (forwards and backwards both ascend), so
/// slot = micro % chunk_slots(...) never hands out a slot still in use.
int chunk_slots(Schedule s, int p, int rank, int m, int v, int chunk);

/// Layers [first, last) of virtual stage `vs` (0..stages-1) when L layers are split into
/// consecutive runs as evenly as possible, the first L % stages runs one longer. Throws
/// std::invalid_argument "N stages but only L layers" when stages > L, and for a bad vs.
std::pair<int, int> stage_layers(int L, int stages, int vs);

}  // namespace gpt::pp
