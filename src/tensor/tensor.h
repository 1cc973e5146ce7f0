// Tensor: a non-owning view of contiguous, row-major data on a device. The
// last dimension is the row; for quantized types a row is a whole number of
// blocks. Storage is owned elsewhere (a mapped file, a Buffer, a KV pool).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "tensor/dtype.h"

namespace folio {

// Where a tensor's bytes live. kCpu: host memory, which host code may read.
// kCuda: an NVIDIA GPU's memory. kSealed: memory the host must not read (the
// sealed test backend: its pointers fault when dereferenced), so that a test
// proves what reads device memory and what does not.
enum class Device { kCpu, kCuda, kSealed };

// The order of a quantized tensor's bytes within each row. kGguf: the file's
// blocks one after another, what every op reads. kCpuPacked: Q4_0 .. Q8_0
// rows interleaved in panels of 8, and Q2_K .. Q6_K super-blocks interleaved
// within each row, by the CPU backend at model load for its matmul kernels
// (backend/cpu/packed_weights.h); only that backend reads them.
enum class Layout : std::uint8_t { kGguf, kCpuPacked };

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::kCpu;
  Layout layout = Layout::kGguf;
  int ndim = 0;
  std::array<std::int64_t, 4> shape{};  // outermost first; shape[ndim - 1] is the row length

  Tensor() = default;
  Tensor(void* data, DType dtype, std::initializer_list<std::int64_t> dims, Device device = Device::kCpu);

  std::int64_t numel() const;
  std::int64_t cols() const { return ndim == 0 ? 1 : shape[ndim - 1]; }
  std::int64_t rows() const { return cols() == 0 ? 0 : numel() / cols(); }
  std::int64_t dim(int i) const { return shape[i]; }
  std::size_t row_bytes() const;
  std::size_t bytes() const { return row_bytes() * static_cast<std::size_t>(rows()); }

  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  // Pointer to row r (rows counted over all leading dimensions).
  void* row(std::int64_t r) const { return static_cast<char*>(data) + r * row_bytes(); }

  // A view of rows [first, first + count) as a 2-D [count, cols] tensor.
  Tensor rows_view(std::int64_t first, std::int64_t count) const;
  // The same data with another shape of equal element count.
  Tensor reshaped(std::initializer_list<std::int64_t> dims) const;

  std::string shape_string() const;
};

}  // namespace folio
