// Buffer: owned memory on a backend's device, 64-byte aligned, move-only;
// Tensors are views into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "tensor/tensor.h"

namespace folio {

class Buffer {
 public:
  Buffer() = default;
  // Host memory (the CPU backends); zero-filled.
  explicit Buffer(std::size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  std::size_t size() const { return size_; }
  Device device() const { return device_; }

  // A tensor view starting `offset_bytes` into the buffer; checked to fit.
  Tensor view(DType dtype, std::initializer_list<std::int64_t> dims, std::size_t offset_bytes = 0) const;

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
  Device device_ = Device::kCpu;
};

}  // namespace folio
