#include "tensor/tensor.h"

#include <fmt/format.h>

#include "core/error.h"

namespace folio {

Tensor::Tensor(void* d, DType t, std::initializer_list<std::int64_t> dims, Device dev)
    : data(d), dtype(t), device(dev), ndim(static_cast<int>(dims.size())) {
  FOLIO_CHECK(dims.size() <= 4);
  int i = 0;
  for (auto v : dims) shape[i++] = v;
}

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

std::size_t Tensor::row_bytes() const { return static_cast<std::size_t>(folio::row_bytes(dtype, cols())); }

Tensor Tensor::rows_view(std::int64_t first, std::int64_t count) const {
  FOLIO_CHECK(first >= 0 && count >= 0 && first + count <= rows());
  Tensor t = *this;
  t.data = static_cast<char*>(data) + first * row_bytes();
  t.ndim = 2;
  t.shape = {count, cols(), 0, 0};
  return t;
}

Tensor Tensor::reshaped(std::initializer_list<std::int64_t> dims) const {
  Tensor t(data, dtype, dims, device);
  FOLIO_CHECK(t.numel() == numel());
  // A packed tensor keeps its row length (its panels hold whole rows).
  FOLIO_CHECK(layout == Layout::kGguf || t.cols() == cols());
  t.layout = layout;
  return t;
}

std::string Tensor::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

}  // namespace folio
