#include "perf_case.hpp"

#include <cmath>
#include <cstring>
#include <numeric>

namespace perf {
namespace {

using strata::DataType;
using strata::ReduceOp;

// Test data: small integers in [-2, 2] ([0, 4] for u8), exact under sum and product over up to
// 8 ranks in every dtype, f16 and bf16 included.
int64_t value(DataType dt, int rank, size_t i) {
  int64_t v = int64_t((uint64_t(rank) * 3 + i * 7 + (i >> 10)) % 5) - 2;
  return dt == DataType::u8 ? v + 2 : v;
}

bool integral(DataType dt) {
  return dt == DataType::i8 || dt == DataType::u8 || dt == DataType::i32 || dt == DataType::i64;
}

// Stores `v` (exactly representable) as element i of dtype dt; integers wrap like the kernels.
void store(void* base, size_t i, DataType dt, double v, int64_t iv) {
  auto* p = static_cast<uint8_t*>(base);
  switch (dt) {
    case DataType::f32: {
      float f = float(v);
      std::memcpy(p + 4 * i, &f, 4);
      break;
    }
    case DataType::f64:
      std::memcpy(p + 8 * i, &v, 8);
      break;
    case DataType::f16: {
      auto h = strata::to_f16(float(v));
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case DataType::bf16: {
      auto h = strata::to_bf16(float(v));
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case DataType::i8: {
      auto x = int8_t(uint64_t(iv));
      std::memcpy(p + i, &x, 1);
      break;
    }
    case DataType::u8: {
      auto x = uint8_t(uint64_t(iv));
      std::memcpy(p + i, &x, 1);
      break;
    }
    case DataType::i32: {
      auto x = int32_t(uint64_t(iv));
      std::memcpy(p + 4 * i, &x, 4);
      break;
    }
    case DataType::i64:
      std::memcpy(p + 8 * i, &iv, 8);
      break;
    default:
      break;  // strata-perf measures the dtypes of its -d list (kDtypes) only
  }
}

// The reduction of element i over all ranks, stored into `dst` as element `at`.
void store_reduced(void* dst, size_t at, DataType dt, ReduceOp op, int n, size_t i) {
  int64_t acc = value(dt, 0, i);
  double facc = double(acc);
  for (int r = 1; r < n; ++r) {
    int64_t v = value(dt, r, i);
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
        break;  // and the ops of its -o list (kOps) only
    }
  }
  if (op == ReduceOp::avg) {
    if (integral(dt))
      acc /= n;
    else
      facc = dt == DataType::f64 ? facc / n : double(float(facc) / float(n));
  }
  store(dst, at, dt, facc, acc);
}

}  // namespace

size_t Case::in_count() const {
  switch (coll) {
    case Coll::all_gather:
      return count / n;
    default:
      return count;
  }
}

void Case::lay_out() {
  std::vector<double> share(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) share[j] = std::pow(double(j + 1), -skew);
  const double total = std::accumulate(share.begin(), share.end(), 0.0);
  std::vector<size_t> block(static_cast<size_t>(n));
  size_t given = 0;
  for (int j = 0; j < n; ++j) given += block[j] = size_t(double(count) * share[j] / total);
  for (int j = 0; given < count; j = (j + 1) % n) ++block[j], ++given;
  v = {};
  for (int j = 0; j < n; ++j) {
    v.send_counts.push_back(block[j]);
    v.send_displs.push_back(j ? v.send_displs[j - 1] + block[j - 1] : 0);
    v.recv_counts.push_back(block[rank]);
    v.recv_displs.push_back(size_t(j) * block[rank]);
  }
}

size_t Case::out_count() const {
  switch (coll) {
    case Coll::all_to_allv:
      return size_t(n) * v.recv_counts[0];
    case Coll::reduce_scatter:
      return count / n;
    default:
      return count;
  }
}

void rewrite(const strata::Buffer& b) {
  auto* p = static_cast<volatile uint8_t*>(b.data);
  for (size_t i = 0; i < b.bytes(); i += 64) p[i] = uint8_t(p[i] + 1);
}

bool Case::supported() const {
  return !(in_place &&
           (coll == Coll::all_to_all || coll == Coll::all_to_allv || coll == Coll::sendrecv));
}

strata::Buffer Case::input(std::span<uint8_t> a, std::span<uint8_t> b) const {
  const size_t es = strata::dtype_size(dtype);
  if (!in_place) return {a.data(), in_count(), dtype};
  if (coll == Coll::all_gather) return {b.data() + rank * in_count() * es, in_count(), dtype};
  if (coll == Coll::reduce_scatter) return {a.data(), in_count(), dtype};
  return {b.data(), in_count(), dtype};
}

strata::Buffer Case::output(std::span<uint8_t> a, std::span<uint8_t> b) const {
  const size_t es = strata::dtype_size(dtype);
  if (in_place && coll == Coll::reduce_scatter) {
    return {a.data() + rank * out_count() * es, out_count(), dtype};
  }
  return {b.data(), out_count(), dtype};
}

strata::Work Case::issue(strata::Communicator& c, strata::Buffer in, strata::Buffer out) const {
  switch (coll) {
    case Coll::all_reduce:
      return c.all_reduce(in, out, op);
    case Coll::all_gather:
      return c.all_gather(in, out);
    case Coll::reduce_scatter:
      return c.reduce_scatter(in, out, op);
    case Coll::all_to_all:
      return c.all_to_all(in, out);
    case Coll::all_to_allv:
      return c.all_to_allv(in, v.send_counts, v.send_displs, out, v.recv_counts, v.recv_displs);
    case Coll::broadcast:
      return c.broadcast(in, out, root);
    case Coll::reduce:
      return c.reduce(in, out, op, root);
    case Coll::sendrecv: {
      strata::Work r = c.recv(out, (rank + n - 1) % n);
      c.send(in, (rank + 1) % n).wait();
      return r;
    }
  }
  return {};
}

void Case::fill_input(strata::Buffer in) const {
  for (size_t i = 0; i < in.count; ++i) {
    int64_t v = value(dtype, rank, i);
    store(in.data, i, dtype, double(v), v);
  }
}

long Case::count_wrong(strata::Buffer out) const {
  if (coll == Coll::reduce && rank != root) return 0;  // output only defined at the root
  const size_t es = strata::dtype_size(dtype);
  std::vector<uint8_t> want(out.count * es);
  const size_t per = count / n;
  for (size_t k = 0; k < out.count; ++k) {
    switch (coll) {
      case Coll::all_reduce:
      case Coll::reduce:
        store_reduced(want.data(), k, dtype, op, n, k);
        break;
      case Coll::reduce_scatter:
        store_reduced(want.data(), k, dtype, op, n, rank * per + k);
        break;
      case Coll::all_gather: {
        int64_t v = value(dtype, int(k / per), k % per);
        store(want.data(), k, dtype, double(v), v);
        break;
      }
      case Coll::all_to_all: {
        const size_t blk = count / n;
        int64_t v = value(dtype, int(k / blk), rank * blk + k % blk);
        store(want.data(), k, dtype, double(v), v);
        break;
      }
      case Coll::all_to_allv: {  // from rank k / mine, where every sender keeps my block
        const size_t mine = this->v.recv_counts[0];
        int64_t v = value(dtype, int(k / mine), this->v.send_displs[rank] + k % mine);
        store(want.data(), k, dtype, double(v), v);
        break;
      }
      case Coll::broadcast: {
        int64_t v = value(dtype, root, k);
        store(want.data(), k, dtype, double(v), v);
        break;
      }
      case Coll::sendrecv: {
        int64_t v = value(dtype, (rank + n - 1) % n, k);
        store(want.data(), k, dtype, double(v), v);
        break;
      }
    }
  }
  long wrong = 0;
  auto* got = static_cast<const uint8_t*>(out.data);
  for (size_t k = 0; k < out.count; ++k) {
    if (std::memcmp(got + k * es, want.data() + k * es, es) != 0) ++wrong;
  }
  return wrong;
}

}  // namespace perf
