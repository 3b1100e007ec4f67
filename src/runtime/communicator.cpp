// The public Communicator: argument checks, then the operation is queued with its algorithm.
#include "strata/communicator.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "runtime/argument_checks.hpp"
#include "runtime/calls.hpp"
#include "runtime/communicator_impl.hpp"
#include "runtime/device_path.hpp"
#include "runtime/entry_checks.hpp"
#include "runtime/watched_store.hpp"

namespace strata {

using runtime::checked;
using runtime::place;

namespace runtime {

Communicator::Impl& checked(const std::shared_ptr<Communicator::Impl>& impl,
                            std::source_location from) {
  if (!impl) {
    // "strata::Work strata::Communicator::all_reduce(...)": the method's name, for the error.
    std::string_view f = from.function_name();
    if (const size_t at = f.find("Communicator::"); at != f.npos) f.remove_prefix(at + 14);
    f = f.substr(0, f.find('('));
    throw Error(ErrorCode::invalid_argument, {.op = std::string(f)},
                "operation on an empty Communicator (default-constructed, or split with a "
                "negative color)");
  }
  return *impl;
}

Placement place(const Checker& check, bool has_stream, void* stream, Buffer a, Buffer b) {
  const bool a_counts = a.count > 0, b_counts = b.count > 0;
  if (a_counts && b_counts && a.memory != b.memory) {
    check.fail(std::string("input is ") + (a.memory == MemoryKind::cuda ? "CUDA device" : "host") +
               " memory and output " + (b.memory == MemoryKind::cuda ? "CUDA device" : "host") +
               " memory: one call takes one kind");
  }
  const MemoryKind m = a_counts ? a.memory : b_counts ? b.memory : MemoryKind::host;
  return {m, has_stream, stream};
}

}  // namespace runtime

Communicator Communicator::on_stream(void* cuda_stream) const {
  Communicator c(impl_);
  c.stream_ = cuda_stream;
  c.has_stream_ = true;
  return c;
}

Communicator Communicator::create(std::shared_ptr<Store> store, int rank, int size,
                                  const CommOptions& options) {
  std::string problem;
  if (!store) problem = "no store given";
  if (size < 1) problem = "a group of " + std::to_string(size) + " ranks: it needs at least 1";
  if (size >= 1 && (rank < 0 || rank >= size)) {
    problem = "rank " + std::to_string(rank) + " is not a rank of a group of " +
              std::to_string(size) + " (0 to " + std::to_string(size - 1) + ")";
  }
  if (!problem.empty()) {
    throw Error(ErrorCode::invalid_argument, {.group = options.name, .op = "create"}, problem);
  }
  return Communicator(runtime::create_group(store, rank, size, options));
}

int Communicator::rank() const { return checked(impl_).rank; }
int Communicator::size() const { return checked(impl_).size; }
const std::string& Communicator::name() const { return checked(impl_).name; }
std::string Communicator::flight_record() const { return checked(impl_).flight_record(); }
std::shared_ptr<Store> Communicator::store() const { return checked(impl_).store; }
void Communicator::abort() { checked(impl_).abort(); }

void Communicator::check_health() {
  auto& c = checked(impl_);
  c.check_health({.rank = c.rank, .group = c.name, .op = "check_health"});
}

Work Communicator::all_reduce(Buffer in, Buffer out, ReduceOp op) {
  auto& c = checked(impl_);
  runtime::Checker check = c.checker("all_reduce");
  check.buffer(in, "input");
  check.buffer(out, "output");
  check.same_dtype(in, out);
  check.count(out, in.count, "output", "all_reduce output has the input's count");
  check.reduce_op(in.dtype, op);
  check.no_overlap(in, out, in.data == out.data);
  return runtime::call(
      c, algo::Collective::all_reduce,
      {.in = in.data, .out = out.data, .count = in.count, .dtype = in.dtype, .op = op},
      place(check, has_stream_, stream_, in, out));
}

Work Communicator::reduce_scatter(Buffer in, Buffer out, ReduceOp op) {
  auto& c = checked(impl_);
  runtime::Checker check = c.checker("reduce_scatter");
  check.buffer(in, "input");
  check.buffer(out, "output");
  check.same_dtype(in, out);
  check.count(in, check.times(out, c.size, "output"), "input",
              "reduce_scatter input is size() * output count");
  check.reduce_op(in.dtype, op);
  check.no_overlap(in, out, out.data == runtime::element_at(in, out.count * c.rank));
  return runtime::call(
      c, algo::Collective::reduce_scatter,
      {.in = in.data, .out = out.data, .count = out.count, .dtype = in.dtype, .op = op},
      place(check, has_stream_, stream_, in, out));
}

Work Communicator::all_gather(Buffer in, Buffer out) {
  auto& c = checked(impl_);
  runtime::Checker check = c.checker("all_gather");
  check.buffer(in, "input");
  check.buffer(out, "output");
  check.same_dtype(in, out);
  check.count(out, check.times(in, c.size, "input"), "output",
              "all_gather output is size() * input count");
  check.no_overlap(in, out, in.data == runtime::element_at(out, in.count * c.rank));
  return runtime::call(c, algo::Collective::all_gather,
                       {.in = in.data, .out = out.data, .count = in.count, .dtype = in.dtype},
                       place(check, has_stream_, stream_, in, out));
}

namespace {

// Shared by all_to_all and all_to_allv: checks the layout, then queues the exchange. `uniform`
// (equal contiguous blocks) lets the shared-memory path take it.
Work all_to_all_impl(Communicator::Impl& c, Buffer in, const std::vector<size_t>& sc,
                     const std::vector<size_t>& sd, Buffer out, const std::vector<size_t>& rc,
                     const std::vector<size_t>& rd, bool uniform, bool has_stream, void* stream) {
  runtime::Checker check = c.checker(uniform ? "all_to_all" : "all_to_allv");
  check.buffer(in, "input");
  check.buffer(out, "output");
  check.same_dtype(in, out);
  const size_t n = size_t(c.size);
  if (sc.size() != n || sd.size() != n || rc.size() != n || rd.size() != n) {
    check.fail("counts and displacements need one entry per rank (" + std::to_string(n) + ")");
  }
  // "3 elements from element 1", and a hint when a negative number reached a size_t.
  auto block = [](size_t count, size_t first) {
    const bool wrapped = count > SIZE_MAX / 2 || first > SIZE_MAX / 2;
    return std::to_string(count) + " elements from element " + std::to_string(first) +
           (wrapped ? " (a negative number, read as unsigned?)" : "");
  };
  for (size_t i = 0; i < n; ++i) {
    if (sd[i] > in.count || sc[i] > in.count - sd[i]) {
      check.fail("send block for rank " + std::to_string(i) + " (" + block(sc[i], sd[i]) +
                 ") does not fit the input's " + std::to_string(in.count) + " elements");
    }
    if (rd[i] > out.count || rc[i] > out.count - rd[i]) {
      check.fail("receive block for rank " + std::to_string(i) + " (" + block(rc[i], rd[i]) +
                 ") does not fit the output's " + std::to_string(out.count) + " elements");
    }
  }
  // Two receive blocks over the same elements would leave whichever arrived last there.
  std::vector<size_t> by_start;
  for (size_t i = 0; i < n; ++i)
    if (rc[i] > 0) by_start.push_back(i);
  std::sort(by_start.begin(), by_start.end(), [&](size_t a, size_t b) { return rd[a] < rd[b]; });
  for (size_t k = 1; k < by_start.size(); ++k) {
    const size_t a = by_start[k - 1], b = by_start[k];
    if (rd[a] + rc[a] > rd[b]) {
      check.fail("receive blocks for ranks " + std::to_string(a) + " (" + block(rc[a], rd[a]) +
                 ") and " + std::to_string(b) + " (" + block(rc[b], rd[b]) + ") overlap");
    }
  }
  if (sc[c.rank] != rc[c.rank]) {
    check.fail("send_counts[rank] (" + std::to_string(sc[c.rank]) + ") != recv_counts[rank] (" +
               std::to_string(rc[c.rank]) + ")");
  }
  check.no_overlap(in, out, false);
  const runtime::Placement placed = place(check, has_stream, stream, in, out);
  if (uniform) {
    return runtime::call(c, algo::Collective::all_to_all,
                         {.in = in.data, .out = out.data, .count = sc[0], .dtype = in.dtype},
                         placed);
  }
  return runtime::call(c, algo::Collective::all_to_allv,
                       {.in = in.data,
                        .out = out.data,
                        .count = in.count,
                        .dtype = in.dtype,
                        .send_counts = sc.data(),
                        .send_displs = sd.data(),
                        .recv_counts = rc.data(),
                        .recv_displs = rd.data()},
                       placed);
}

}  // namespace

Work Communicator::all_to_all(Buffer in, Buffer out) {
  auto& c = checked(impl_);
  runtime::Checker check = c.checker("all_to_all");
  if (in.count % c.size != 0) {
    check.fail("input count " + std::to_string(in.count) + " is not a multiple of the group size " +
               std::to_string(c.size));
  }
  // Equal blocks both ways: an output of another size would leave part of it unwritten (or be
  // written past, by the segment's path, which moves whole blocks).
  check.count(out, in.count, "output", "all_to_all output has the input's count");
  const size_t block = in.count / c.size;
  std::vector<size_t> counts(c.size, block), displs(c.size);
  for (int i = 0; i < c.size; ++i) displs[i] = block * i;
  return all_to_all_impl(c, in, counts, displs, out, counts, displs, true, has_stream_, stream_);
}

Work Communicator::all_to_allv(Buffer in, const std::vector<size_t>& sc,
                               const std::vector<size_t>& sd, Buffer out,
                               const std::vector<size_t>& rc, const std::vector<size_t>& rd) {
  return all_to_all_impl(checked(impl_), in, sc, sd, out, rc, rd, false, has_stream_, stream_);
}

Work Communicator::barrier() {
  return runtime::call(checked(impl_), algo::Collective::barrier, {});
}

void Communicator::issue_from_this_thread() { runtime::issue_from_this_thread(checked(impl_)); }

namespace {
// A child group's options: the name under its parent's unless given, and the parent's deadline
// unless given (not STRATA_TIMEOUT: a world made with a deadline of 60 s has subgroups of 60 s,
// the mesh's and the ZeRO engine's too, which take no options from the trainer).
CommOptions child_options(const Communicator::Impl& parent, const CommOptions& given,
                          const std::string& suffix) {
  CommOptions o = given;
  if (o.name == CommOptions{}.name) o.name = parent.name + "/" + suffix;
  if (o.timeout.count() == 0) o.timeout = parent.timeout();
  o.cancelled = nullptr;  // asked by the setup's store (WatchedStore), not kept by the group
  return o;
}
}  // namespace

Communicator Communicator::on_my_stream(Communicator sub) const {
  if (sub && has_stream_) return sub.on_stream(stream_);
  return sub;
}

Communicator Communicator::split(int color, int key, const CommOptions& options) {
  auto& c = checked(impl_);
  const uint64_t id = c.next_split();
  std::vector<int32_t> mine = {color, key}, all(2 * size_t(c.size));
  all_gather(buffer(mine), buffer(all)).wait();
  Communicator sub;
  ErrorContext where = c.context("split");
  if (color >= 0) {
    // Members: ranks with my color, ordered by (key, old rank).
    std::vector<int> members;
    for (int r = 0; r < c.size; ++r) {
      if (all[2 * r] == color) members.push_back(r);
    }
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
    const int new_rank = int(std::find(members.begin(), members.end(), c.rank) - members.begin());
    const std::string suffix = "split" + std::to_string(id) + ".c" + std::to_string(color);
    // The new group's setup waits for every member's part; a member that aborted this group
    // or died meanwhile never sends it. Its waits end once this group learns of that, and the
    // split fails naming the member (not at the deadline, naming whoever published last).
    const std::weak_ptr<Impl> parent = impl_;
    auto store = std::make_shared<runtime::WatchedStore>(
        std::make_shared<PrefixStore>(c.store, suffix), [parent, where, options] {
          if (options.cancelled && options.cancelled()) return true;
          try {
            if (const auto p = parent.lock()) p->check_health(where);
            return false;
          } catch (const Error&) {
            return true;
          }
        });
    try {
      sub = create(store, new_rank, int(members.size()), child_options(c, options, suffix));
    } catch (const Error&) {
      c.check_health(where);  // throws this group's failure, the cause, when it has one
      throw;
    }
    store->stop_watching();
    where = sub.impl_->context("split");
  }
  // Every rank, a negative color's too: ncclCommSplit is collective over this group.
  if (auto device = runtime::split_device(c, color, key, where); device) {
    sub.impl_->device = std::move(device);
  }
  return on_my_stream(std::move(sub));
}

Communicator Communicator::shrink(const std::vector<int>& exclude, const CommOptions& options) {
  auto& c = checked(impl_);
  std::vector<int> x = exclude;
  std::sort(x.begin(), x.end());
  ErrorContext where{.rank = c.rank, .group = c.name, .op = "shrink"};
  for (size_t i = 0; i < x.size(); ++i) {
    const std::string bad = x[i] < 0 || x[i] >= c.size  ? "is out of range"
                            : x[i] == c.rank            ? "is this rank's own"
                            : i > 0 && x[i] == x[i - 1] ? "is listed twice"
                                                        : "";
    if (!bad.empty())
      throw Error(ErrorCode::invalid_argument, where,
                  "excluded rank " + std::to_string(x[i]) + " " + bad + " (group of " +
                      std::to_string(c.size) + ")");
  }
  // The key names the excluded ranks: survivors that disagree meet in different places and time
  // out instead of forming a wrong group.
  std::string suffix = "shrink" + std::to_string(c.next_split()) + ".x";
  for (int r : x) suffix += std::to_string(r) + "_";
  const int new_rank = c.rank - int(std::lower_bound(x.begin(), x.end(), c.rank) - x.begin());
  std::shared_ptr<Store> store = std::make_shared<PrefixStore>(c.store, suffix);
  const auto watched = runtime::watch_for_cancel(store, options);
  Communicator sub = create(watched ? watched : store, new_rank, c.size - int(x.size()),
                            child_options(c, options, suffix));
  if (watched) watched->stop_watching();
  return on_my_stream(std::move(sub));
}

}  // namespace strata
