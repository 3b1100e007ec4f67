#include "sparse_sum.hpp"

#include <c10/util/Exception.h>

#include <numeric>
#include <sstream>

#include "tensors.hpp"

namespace strata::torch_backend {
namespace {

// What every rank tells the others before the gathers: its entries, then what must agree.
enum Field { kNnz, kSparseDims, kDenseDims, kDtype, kDims, kFields };

// The same vector from every rank (blocking: the gathers cannot be sized without it).
std::vector<int64_t> gather_all(Communicator& comm, std::vector<int64_t> mine) {
  std::vector<int64_t> all(mine.size() * size_t(comm.size()));
  comm.all_gather(buffer(mine), buffer(all)).wait();
  return all;
}

// The first rank whose `width` fields starting at `from` differ from rank 0's, or -1.
int first_differing(const std::vector<int64_t>& all, size_t width, size_t from, size_t n) {
  if (width == 0) return -1;
  for (size_t r = 1; r < all.size() / width; ++r) {
    if (!std::equal(all.begin() + long(from), all.begin() + long(from + n),
                    all.begin() + long(r * width + from))) {
      return int(r);
    }
  }
  return -1;
}

// "a Float tensor of shape [4, 2] with 1 sparse and 1 dense dims"; `sizes` may be unknown.
std::string describe(const int64_t* head, const int64_t* sizes) {
  std::ostringstream s;
  s << "a " << at::ScalarType(head[kDtype]) << " tensor of ";
  if (sizes) {
    s << "shape [";
    for (int64_t i = 0; i < head[kDims]; ++i) s << (i ? ", " : "") << sizes[i];
    s << "]";
  } else {
    s << head[kDims] << " dims";
  }
  s << " with " << head[kSparseDims] << " sparse and " << head[kDenseDims] << " dense dims";
  return s.str();
}

}  // namespace

void issue_sparse_sum(Communicator& comm, const at::Tensor& tensor, StrataWork& w) {
  TORCH_CHECK_VALUE(tensor.layout() == at::kSparse && tensor.device().is_cpu(), "strata ",
                    "all_reduce: a sparse tensor must be a sparse COO tensor on the CPU, not ",
                    tensor.layout(), " on ", tensor.device());
  const at::Tensor local = tensor.coalesce();                   // fewer entries to send
  const at::Tensor indices = local.indices().t().contiguous();  // one row per entry
  const at::Tensor values = local.values().contiguous();        // [entries, dense sizes...]
  const std::vector<int64_t> sizes = tensor.sizes().vec();
  const std::vector<int64_t> head = {local._nnz(), tensor.sparse_dim(), tensor.dense_dim(),
                                     int64_t(tensor.scalar_type()), tensor.dim()};

  // Every rank sees every rank's header and shape, so every rank raises the same error.
  const std::vector<int64_t> heads = gather_all(comm, head);
  int bad = first_differing(heads, kFields, kSparseDims, kFields - kSparseDims);
  const std::vector<int64_t> shapes = bad < 0 ? gather_all(comm, sizes) : std::vector<int64_t>{};
  if (bad < 0) bad = first_differing(shapes, sizes.size(), 0, sizes.size());
  if (bad >= 0) {
    auto said = [&](int r) {
      return describe(&heads[size_t(r) * kFields],
                      shapes.empty() ? nullptr : &shapes[size_t(r) * sizes.size()]);
    };
    TORCH_CHECK_VALUE(false, "strata all_reduce (sparse) on rank ", comm.rank(), ": rank ", bad,
                      " passed ", said(bad), ", rank 0 ", said(0));
  }
  view(values, "all_reduce");  // a dtype Strata carries: the same verdict on every rank now

  // Gather every rank's rows of indices and of values: uneven blocks, so an all_to_allv with
  // this rank's one block sent to every rank.
  const size_t n = size_t(comm.size());
  std::vector<size_t> entries(n);
  for (size_t r = 0; r < n; ++r) entries[r] = size_t(heads[r * kFields + kNnz]);
  const int64_t total = std::accumulate(entries.begin(), entries.end(), int64_t{0});
  std::vector<int64_t> value_shape = values.sizes().vec();
  value_shape[0] = total;
  const at::Tensor all_indices = at::empty({total, tensor.sparse_dim()}, indices.options());
  const at::Tensor all_values = at::empty(value_shape, values.options());
  if (total > 0) {
    auto gather_rows = [&](const at::Tensor& mine, const at::Tensor& all, size_t row) {
      std::vector<size_t> recv(n), displs(n);
      for (size_t r = 0; r < n; ++r) recv[r] = entries[r] * row;
      std::exclusive_scan(recv.begin(), recv.end(), displs.begin(), size_t{0});
      const std::vector<size_t> send(n, size_t(mine.numel())), zeros(n, 0);
      w.add(comm.all_to_allv(view(mine, "all_reduce"), send, zeros, view(all, "all_reduce"), recv,
                             displs));
    };
    gather_rows(indices, all_indices, size_t(tensor.sparse_dim()));
    gather_rows(values, all_values, size_t(all_values.numel() / total));
  }
  w.on_success([tensor, indices, values, all_indices, all_values] {
    tensor.copy_(at::sparse_coo_tensor(all_indices.t(), all_values, tensor.sizes()).coalesce());
  });
}

}  // namespace strata::torch_backend
