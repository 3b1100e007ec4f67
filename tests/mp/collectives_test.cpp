// Every collective x dtype x op x in/out-of-place x size, element by element against an
// independent reference, and bit-identical across ranks. Value checks are non-fatal (EXPECT) so
// that every rank keeps issuing the same sequence of collectives even after a failure.
#include <complex>

#include "mp.hpp"
#include "shm/write_mode.hpp"

using namespace strata;
using mp::alloc;
using mp::view;

namespace {

std::string label(DataType dt, size_t n, bool in_place, const char* op = "") {
  return std::string(dtype_name(dt)) + " " + op + " n=" + std::to_string(n) +
         (in_place ? " in-place" : " out-of-place");
}

// `first`: where the fill pattern starts, so that repeated calls carry different values.
void check_all_reduce(DataType dt, ReduceOp op, size_t n, bool in_place, size_t first = 0) {
  auto& w = mp::world();
  SCOPED_TRACE(label(dt, n, in_place, std::string(op_name(op)).c_str()));
  auto in = alloc(dt, n), out = alloc(dt, n), want = alloc(dt, n);
  mp::fill(in.data(), dt, n, w.rank(), first);
  mp::reference_reduce(want.data(), dt, op, n, w.size(), first);
  auto& result = in_place ? in : out;
  w.all_reduce(view(in, dt), view(result, dt), op).wait();
  EXPECT_EQ(mp::compare(result.data(), want.data(), dt, n), "");
  EXPECT_TRUE(mp::identical_on_all_ranks(w, result.data(), result.size()));
}

void check_reduce_scatter(DataType dt, ReduceOp op, size_t n, bool in_place) {
  auto& w = mp::world();
  SCOPED_TRACE(label(dt, n, in_place, std::string(op_name(op)).c_str()));
  const size_t total = n * w.size();
  auto in = alloc(dt, total), out = alloc(dt, n), want = alloc(dt, n);
  mp::fill(in.data(), dt, total, w.rank());
  mp::reference_reduce(want.data(), dt, op, n, w.size(), n * w.rank());
  Buffer dst = in_place ? view(in, dt, n * w.rank(), n) : view(out, dt);
  w.reduce_scatter(view(in, dt), dst, op).wait();
  EXPECT_EQ(mp::compare(dst.data, want.data(), dt, n), "");
}

void check_all_gather(DataType dt, size_t n, bool in_place, size_t first = 0) {
  auto& w = mp::world();
  SCOPED_TRACE(label(dt, n, in_place));
  const size_t total = n * w.size();
  auto in = alloc(dt, n), out = alloc(dt, total), want = alloc(dt, total);
  for (int r = 0; r < w.size(); ++r) {
    mp::fill(want.data() + r * n * dtype_size(dt), dt, n, r, first, 3);
  }
  Buffer src = view(in, dt);
  if (in_place) src = view(out, dt, n * w.rank(), n);
  mp::fill(src.data, dt, n, w.rank(), first, 3);
  w.all_gather(src, view(out, dt)).wait();
  EXPECT_EQ(mp::compare(out.data(), want.data(), dt, total), "");
  EXPECT_TRUE(mp::identical_on_all_ranks(w, out.data(), out.size()));
}

void check_all_to_all(DataType dt, size_t n, size_t first = 0) {
  auto& w = mp::world();
  SCOPED_TRACE(label(dt, n, false));
  const size_t total = n * w.size(), es = dtype_size(dt);
  auto in = alloc(dt, total), out = alloc(dt, total), want = alloc(dt, total);
  // Block j of rank r's input holds pattern(r, j*n + k, salt 1); rank r receives block r of all.
  mp::fill(in.data(), dt, total, w.rank(), first, 1);
  for (int src = 0; src < w.size(); ++src) {
    mp::fill(want.data() + src * n * es, dt, n, src, first + w.rank() * n, 1);
  }
  w.all_to_all(view(in, dt), view(out, dt)).wait();
  EXPECT_EQ(mp::compare(out.data(), want.data(), dt, total), "");
}

void check_broadcast(DataType dt, size_t n, bool in_place, int root) {
  auto& w = mp::world();
  SCOPED_TRACE(label(dt, n, in_place) + " root " + std::to_string(root));
  auto in = alloc(dt, n), out = alloc(dt, n), want = alloc(dt, n);
  mp::fill(want.data(), dt, n, root, 0, 2);
  if (w.rank() == root) mp::fill(in_place ? out.data() : in.data(), dt, n, root, 0, 2);
  if (in_place)
    w.broadcast(view(out, dt), root).wait();
  else
    w.broadcast(view(in, dt), view(out, dt), root).wait();
  EXPECT_EQ(mp::compare(out.data(), want.data(), dt, n), "");
}

void check_reduce(DataType dt, ReduceOp op, size_t n, bool in_place, int root) {
  auto& w = mp::world();
  SCOPED_TRACE(label(dt, n, in_place, std::string(op_name(op)).c_str()) + " root " +
               std::to_string(root));
  auto in = alloc(dt, n), out = alloc(dt, n), want = alloc(dt, n);
  mp::fill(in.data(), dt, n, w.rank());
  auto& result = in_place ? in : out;
  w.reduce(view(in, dt), view(result, dt), op, root).wait();
  if (w.rank() == root) {
    mp::reference_reduce(want.data(), dt, op, n, w.size());
    EXPECT_EQ(mp::compare(result.data(), want.data(), dt, n), "");
  } else {
    // Non-root input must be left untouched.
    mp::fill(want.data(), dt, n, w.rank());
    EXPECT_EQ(mp::compare(in.data(), want.data(), dt, n), "");
  }
}

void check_gather_scatter(DataType dt, size_t n, bool in_place, int root) {
  auto& w = mp::world();
  SCOPED_TRACE(label(dt, n, in_place) + " root " + std::to_string(root));
  const size_t total = n * w.size(), es = dtype_size(dt);
  const bool is_root = w.rank() == root;
  // gather: rank r contributes pattern(r); root gets all in rank order.
  auto in = alloc(dt, n), all = alloc(dt, total), want = alloc(dt, total);
  Buffer src = in_place && is_root ? view(all, dt, n * root, n) : view(in, dt);
  mp::fill(src.data, dt, n, w.rank(), 0, 4);
  w.gather(src, view(all, dt), root).wait();
  for (int r = 0; r < w.size(); ++r) mp::fill(want.data() + r * n * es, dt, n, r, 0, 4);
  if (is_root) {
    EXPECT_EQ(mp::compare(all.data(), want.data(), dt, total), "") << "gather";
  }
  // scatter: root sends block r = pattern(root, r*n + k) to rank r.
  auto block = alloc(dt, n), expect = alloc(dt, n);
  if (is_root) mp::fill(all.data(), dt, total, root, 0, 5);
  Buffer dst = in_place && is_root ? view(all, dt, n * root, n) : view(block, dt);
  w.scatter(view(all, dt), dst, root).wait();
  mp::fill(expect.data(), dt, n, root, n * w.rank(), 5);
  EXPECT_EQ(mp::compare(dst.data, expect.data(), dt, n), "") << "scatter";
}

}  // namespace

TEST(Collectives, AllReduceEveryDtypeOpSize) {
  for (DataType dt : mp::all_dtypes())
    for (ReduceOp op : mp::all_ops())
      for (size_t n : mp::small_counts())
        for (bool ip : {false, true}) check_all_reduce(dt, op, n, ip);
}

namespace {

// The dtypes and ops added for torch (boolean, i16, u32, u64, complex; band, bor, bxor), against
// a fold written here with the types' own arithmetic. Small integer values keep every product
// exact.
template <typename T>
T more_value(int rank, size_t i) {
  const int v = int((rank * 7 + i * 13) % 11) - 5;
  if constexpr (std::is_same_v<T, bool>)
    return (v & 1) != 0;
  else if constexpr (requires { typename T::value_type; })  // complex
    return T(typename T::value_type(v), typename T::value_type(int((rank + 2) * (i % 3)) % 5 - 2));
  else
    return T(v);
}

template <typename T>
T more_fold(T a, T b, ReduceOp op) {
  if constexpr (std::is_same_v<T, bool>) {
    if (op == ReduceOp::bxor) return a != b;
    return (op == ReduceOp::prod || op == ReduceOp::min || op == ReduceOp::band) ? (a && b)
                                                                                 : (a || b);
  } else if constexpr (requires { typename T::value_type; }) {
    return op == ReduceOp::prod ? a * b : a + b;
  } else {
    using U = std::make_unsigned_t<decltype(T() + 0)>;  // wraps as the kernels do
    switch (op) {
      case ReduceOp::prod:
        return T(U(a) * U(b));
      case ReduceOp::min:
        return std::min(a, b);
      case ReduceOp::max:
        return std::max(a, b);
      case ReduceOp::band:
        return T(a & b);
      case ReduceOp::bor:
        return T(a | b);
      case ReduceOp::bxor:
        return T(a ^ b);
      default:
        return T(U(a) + U(b));
    }
  }
}

template <typename T>
void check_more(DataType dt, ReduceOp op, size_t n, bool in_place) {
  auto& w = mp::world();
  SCOPED_TRACE(label(dt, n, in_place, std::string(op_name(op)).c_str()));
  // unique_ptr, not vector: std::vector<bool> is a bitset with no data().
  auto in = std::make_unique<T[]>(n), out = std::make_unique<T[]>(n),
       want = std::make_unique<T[]>(n);
  for (size_t i = 0; i < n; ++i) {
    in[i] = more_value<T>(w.rank(), i);
    want[i] = more_value<T>(0, i);
    for (int r = 1; r < w.size(); ++r) want[i] = more_fold(want[i], more_value<T>(r, i), op);
    if constexpr (requires { typename T::value_type; }) {
      if (op == ReduceOp::avg) want[i] /= typename T::value_type(w.size());
    } else if constexpr (!std::is_same_v<T, bool>) {
      if (op == ReduceOp::avg) want[i] = T(want[i] / T(w.size()));
    }
  }
  auto& result = in_place ? in : out;
  w.all_reduce(Buffer{in.get(), n, dt}, Buffer{result.get(), n, dt}, op).wait();
  size_t bad = 0;
  while (bad < n && result[bad] == want[bad]) ++bad;
  EXPECT_EQ(bad, n) << "first wrong element";
}

}  // namespace

TEST(Collectives, AllReduceTorchDtypesAndBitwiseOps) {
  const std::vector<ReduceOp> every = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min,
                                       ReduceOp::max, ReduceOp::avg,  ReduceOp::band,
                                       ReduceOp::bor, ReduceOp::bxor};
  const std::vector<ReduceOp> bitwise = {ReduceOp::band, ReduceOp::bor, ReduceOp::bxor};
  for (size_t n : {size_t(1), size_t(1000), size_t(70000)})
    for (bool ip : {false, true}) {
      for (ReduceOp op : every) {
        if (op != ReduceOp::avg) check_more<bool>(DataType::boolean, op, n, ip);
        check_more<int16_t>(DataType::i16, op, n, ip);
        check_more<uint32_t>(DataType::u32, op, n, ip);
        check_more<uint64_t>(DataType::u64, op, n, ip);
      }
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::avg}) {
        check_more<std::complex<float>>(DataType::c64, op, n, ip);
        check_more<std::complex<double>>(DataType::c128, op, n, ip);
      }
      for (ReduceOp op : bitwise) {
        check_more<int8_t>(DataType::i8, op, n, ip);
        check_more<int64_t>(DataType::i64, op, n, ip);
      }
    }
}

// Sizes for reduce-scatter, all-gather and all-to-all are the whole buffer, as in nccl-tests
// (input of reduce-scatter, output of all-gather); each rank's block is size / n, rounded up so
// that sizes 1 and 7 still move data on every world size.
size_t per_rank(size_t total) { return (total + mp::world().size() - 1) / mp::world().size(); }

TEST(Collectives, ReduceScatterEveryDtypeOpSize) {
  for (DataType dt : mp::all_dtypes())
    for (ReduceOp op : mp::all_ops())
      for (size_t n : mp::small_counts())
        for (bool ip : {false, true}) check_reduce_scatter(dt, op, per_rank(n), ip);
}

TEST(Collectives, AllGatherEveryDtypeSize) {
  for (DataType dt : mp::all_dtypes())
    for (size_t n : mp::small_counts())
      for (bool ip : {false, true}) check_all_gather(dt, per_rank(n), ip);
}

TEST(Collectives, AllToAllEveryDtypeSize) {
  for (DataType dt : mp::all_dtypes())
    for (size_t n : mp::small_counts()) check_all_to_all(dt, per_rank(n));
}

TEST(Collectives, AllToAllvUnevenCounts) {
  auto& w = mp::world();
  const int n = w.size(), me = w.rank();
  // Rank r sends (r + j) % 3 + j elements to rank j; value = 1000 * r + j * 10 + k.
  auto count = [](int from, int to) { return size_t((from + to) % 3 + to); };
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t stotal = 0, rtotal = 0;
  for (int j = 0; j < n; ++j) {
    sc[j] = count(me, j), sd[j] = stotal, stotal += sc[j];
    rc[j] = count(j, me), rd[j] = rtotal, rtotal += rc[j];
  }
  std::vector<int64_t> in(stotal), out(rtotal, -1), want(rtotal);
  for (int j = 0; j < n; ++j)
    for (size_t k = 0; k < sc[j]; ++k) in[sd[j] + k] = 1000 * me + j * 10 + int64_t(k);
  for (int j = 0; j < n; ++j)
    for (size_t k = 0; k < rc[j]; ++k) want[rd[j] + k] = 1000 * j + me * 10 + int64_t(k);
  w.all_to_allv(buffer(in), sc, sd, buffer(out), rc, rd).wait();
  EXPECT_EQ(out, want);
}

TEST(Collectives, BroadcastEveryDtypeSizeRoot) {
  auto& w = mp::world();
  int i = 0;
  for (DataType dt : mp::all_dtypes())
    for (size_t n : mp::small_counts())
      for (bool ip : {false, true}) check_broadcast(dt, n, ip, (i++) % w.size());
}

TEST(Collectives, ReduceEveryDtypeOpSizeRoot) {
  auto& w = mp::world();
  int i = 0;
  for (DataType dt : mp::all_dtypes())
    for (ReduceOp op : mp::all_ops())
      for (size_t n : mp::small_counts())
        for (bool ip : {false, true}) check_reduce(dt, op, n, ip, (i++) % w.size());
}

TEST(Collectives, GatherScatterEveryDtypeSizeRoot) {
  auto& w = mp::world();
  int i = 0;
  for (DataType dt : mp::all_dtypes())
    for (size_t n : mp::small_counts())
      for (bool ip : {false, true}) check_gather_scatter(dt, n, ip, (i++) % w.size());
}

TEST(Collectives, Barrier) {
  for (int i = 0; i < 20; ++i) mp::world().barrier().wait();
}

// 64 Mi f32 elements (256 MiB) per buffer: the large end of the size range.
TEST(CollectivesLarge, F32Sum64Mi) {
  const size_t big = size_t(64) << 20;
  for (bool ip : {false, true}) check_all_reduce(DataType::f32, ReduceOp::sum, big, ip);
  check_reduce_scatter(DataType::f32, ReduceOp::sum, per_rank(big), false);
  check_all_gather(DataType::f32, per_rank(big), true);
  check_all_to_all(DataType::f32, per_rank(big));
  check_broadcast(DataType::f32, big, true, mp::world().size() - 1);
  check_reduce(DataType::f32, ReduceOp::sum, big, false, 0);
  check_gather_scatter(DataType::f32, per_rank(big), false, mp::world().size() / 2);
}

// From 64 KiB on, each rank stages chunks with ordinary or streaming stores, whichever it has timed
// faster (shm/write_mode.hpp): the first operations of each kind try both and every
// 16th tries the other, so these run in both modes and sometimes in different modes on different
// ranks. Every call carries different values, so a stale staging buffer cannot pass.
TEST(CollectivesLarge, LearnedStagingStores) {
  const size_t n = size_t(1) << 20;  // f32: 4 MiB
  for (size_t i = 0; i < shm::WriteModeChoice::kTryEvery + 2; ++i) {
    check_all_reduce(DataType::f32, ReduceOp::sum, n, i % 2 == 1, 1000 * i);
    check_all_gather(DataType::f32, per_rank(n), false, 1000 * i);
    check_all_to_all(DataType::f32, per_rank(n), 1000 * i);
  }
}

TEST(Collectives, ManyOutstandingCompleteInOrder) {
  auto& w = mp::world();
  const int k = 16;
  std::vector<std::vector<int32_t>> bufs(k, std::vector<int32_t>(1000));
  std::vector<Work> works;
  for (int i = 0; i < k; ++i) {
    for (size_t j = 0; j < bufs[i].size(); ++j) bufs[i][j] = int32_t(i * w.rank() + j);
    works.push_back(w.all_reduce(buffer(bufs[i]), ReduceOp::sum));
  }
  // Waiting on the last completes all of them (issue order).
  works.back().wait();
  for (int i = 0; i < k; ++i) EXPECT_TRUE(works[i].test()) << i;
  const int64_t ranks_sum = int64_t(w.size()) * (w.size() - 1) / 2;
  for (int i = 0; i < k; ++i)
    for (size_t j = 0; j < bufs[i].size(); ++j)
      ASSERT_EQ(bufs[i][j], int32_t(i * ranks_sum + int64_t(j) * w.size())) << i << "," << j;
}
