// main() of the multi-process tests: joins the job (mpirun or strata-run), runs every test on
// every rank, prints the full report on rank 0 and only failures (tagged with the rank) elsewhere.
#include <unistd.h>

#include <cstdio>
#include <functional>

#include "mp.hpp"

namespace mp {
namespace {
strata::Communicator g_world;

class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name(), r.line_number(),
                 r.summary());
  }

 private:
  int rank_;
};
}  // namespace

strata::Communicator& world() { return g_world; }

int64_t pattern(int rank, size_t i, int salt) {
  // Period kPeriod in i (a prime, so no block offset of these tests is a multiple of it and a
  // shifted block cannot match by accident), mixed so neighbouring elements differ irregularly.
  uint64_t x = (i % kPeriod) * 0x9E3779B97F4A7C15ull + uint64_t(rank) * 0xBF58476D1CE4E5B9ull +
               uint64_t(salt) * 0x94D049BB133111EBull;
  x ^= x >> 29;
  return int64_t(x % 5) - 2;
}

namespace {
template <typename T>
T as(double v) {
  if constexpr (std::is_same_v<T, strata::f16_t>)
    return strata::to_f16(float(v));
  else if constexpr (std::is_same_v<T, strata::bf16_t>)
    return strata::to_bf16(float(v));
  else
    return T(v);
}

template <typename F>
void dispatch(strata::DataType dt, F f) {
  using strata::DataType;
  switch (dt) {
    case DataType::f32:
      f(float{});
      break;
    case DataType::f64:
      f(double{});
      break;
    case DataType::f16:
      f(strata::f16_t{});
      break;
    case DataType::bf16:
      f(strata::bf16_t{});
      break;
    case DataType::i8:
      f(int8_t{});
      break;
    case DataType::u8:
      f(uint8_t{});
      break;
    case DataType::i32:
      f(int32_t{});
      break;
    case DataType::i64:
      f(int64_t{});
      break;
    default:
      ADD_FAILURE() << "no fill pattern for " << strata::dtype_name(dt);
      break;
  }
}

int64_t value(strata::DataType dt, int rank, size_t i, int salt) {
  int64_t v = pattern(rank, i, salt);
  return dt == strata::DataType::u8 ? v + 2 : v;
}

// Writes elements [first, first + n) of a kPeriod-periodic sequence: computes one period with
// `element(i)` and tiles it, which keeps 64 Mi-element checks fast on a 2-core machine.
template <typename T, typename E>
void tiled(T* d, size_t n, size_t first, E element) {
  const size_t one = std::min(n, kPeriod);
  for (size_t k = 0; k < one; ++k) d[k] = element(first + k);
  for (size_t done = one; done < n;) {
    size_t c = std::min(done, n - done);  // double the filled prefix each round
    std::memcpy(d + done, d, c * sizeof(T));
    done += c;
  }
}
}  // namespace

void fill(void* dst, strata::DataType dt, size_t n, int rank, size_t first, int salt) {
  dispatch(dt, [&](auto t) {
    using T = decltype(t);
    tiled(static_cast<T*>(dst), n, first,
          [&](size_t i) { return as<T>(double(value(dt, rank, i, salt))); });
  });
}

void reference_reduce(void* dst, strata::DataType dt, strata::ReduceOp op, size_t n, int nranks,
                      size_t first, int salt) {
  using strata::ReduceOp;
  const bool integral = dt == strata::DataType::i8 || dt == strata::DataType::u8 ||
                        dt == strata::DataType::i32 || dt == strata::DataType::i64;
  dispatch(dt, [&](auto t) {
    using T = decltype(t);
    tiled(static_cast<T*>(dst), n, first, [&](size_t i) -> T {
      // Integers in int64 (wrapped into T below); floats in double, which is exact for these
      // values and gets IEEE signed zeros right (0 * -2 = -0).
      int64_t acc = value(dt, 0, i, salt);
      double facc = double(acc);
      for (int r = 1; r < nranks; ++r) {
        int64_t v = value(dt, r, i, salt);
        switch (op) {
          case ReduceOp::sum:
          case ReduceOp::avg:
            acc += v, facc += double(v);
            break;
          case ReduceOp::prod:
            acc *= v, facc *= double(v);
            break;
          case ReduceOp::min:
            acc = std::min(acc, v), facc = std::min(facc, double(v));
            break;
          case ReduceOp::max:
            acc = std::max(acc, v), facc = std::max(facc, double(v));
            break;
          default:
            ADD_FAILURE() << "bitwise ops have their own test";
            break;
        }
      }
      if (op == ReduceOp::avg) {
        if (integral) return T(acc / nranks);
        if constexpr (std::is_same_v<T, double>) return double(acc) / double(nranks);
        return as<T>(double(float(acc) / float(nranks)));
      }
      if constexpr (std::is_integral_v<T>) {
        return T(uint64_t(acc));  // wraps in T, as the kernels do step by step
      } else {
        return as<T>(facc);
      }
    });
  });
}

std::string compare(const void* got, const void* want, strata::DataType dt, size_t n) {
  const size_t es = strata::dtype_size(dt);
  auto* g = static_cast<const uint8_t*>(got);
  auto* w = static_cast<const uint8_t*>(want);
  if (n == 0 || std::memcmp(g, w, n * es) == 0) return "";
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(g + i * es, w + i * es, es) != 0) {
      uint64_t gv = 0, wv = 0;
      std::memcpy(&gv, g + i * es, es);
      std::memcpy(&wv, w + i * es, es);
      char msg[160];
      std::snprintf(msg, sizeof msg, "element %zu of %zu: got bits 0x%llx, want 0x%llx (%s)", i, n,
                    (unsigned long long)gv, (unsigned long long)wv,
                    std::string(strata::dtype_name(dt)).c_str());
      return msg;
    }
  }
  return "";
}

bool identical_on_all_ranks(strata::Communicator& comm, const void* data, size_t bytes) {
  // FNV-1a over 8-byte words (then the tail); any difference between ranks changes it with
  // overwhelming odds.
  uint64_t h = 1469598103934665603ull;
  auto* p = static_cast<const uint8_t*>(data);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  std::vector<int64_t> mine = {int64_t(h)}, all(comm.size());
  comm.all_gather(strata::buffer(mine), strata::buffer(all)).wait();
  for (int64_t v : all) {
    if (v != int64_t(h)) return false;
  }
  return true;
}

}  // namespace mp

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  mp::g_world = strata::Communicator::from_env();
  const int rank = mp::g_world.rank();
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new mp::FailurePrinter(rank));
  }
  int rc = RUN_ALL_TESTS();
  mp::g_world.barrier().wait();
  mp::g_world = strata::Communicator();
  return rc;
}
