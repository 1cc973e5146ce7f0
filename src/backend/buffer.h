// Buffer: memory a backend made on its device (or on the host for staging),
// move-only, with the release its maker gave it; Tensors are views into it.
// Nothing but the backend that made a buffer frees or reads its memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>

#include "tensor/tensor.h"

namespace folio {

class Buffer {
 public:
  Buffer() = default;
  // `release` frees the memory (called once, when the buffer goes); a
  // backend's allocate and load_weight are the only callers.
  Buffer(void* data, std::size_t bytes, Device device, std::function<void()> release);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  std::size_t size() const { return size_; }
  Device device() const { return device_; }
  bool empty() const { return data_ == nullptr; }

  // A tensor view starting `offset_bytes` into the buffer; checked to fit.
  Tensor view(DType dtype, std::initializer_list<std::int64_t> dims, std::size_t offset_bytes = 0) const;

 private:
  void reset();

  void* data_ = nullptr;
  std::size_t size_ = 0;
  Device device_ = Device::kCpu;
  std::function<void()> release_;
};

// Zero-filled host memory, 64-byte aligned (an anonymous mapping, committed
// page by page as it is touched, so a large KV pool costs memory only where
// tokens are written). The host backends' allocate, and host-side staging.
Buffer host_buffer(std::size_t bytes);

}  // namespace folio
