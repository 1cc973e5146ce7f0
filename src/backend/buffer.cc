#include "backend/buffer.h"

#include <sys/mman.h>

#include <utility>

#include "core/error.h"

namespace folio {

Buffer::Buffer(void* data, std::size_t bytes, Device device, std::function<void()> release)
    : data_(data), size_(bytes), device_(device), release_(std::move(release)) {}

Buffer::~Buffer() { reset(); }

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(other.device_),
      release_(std::exchange(other.release_, nullptr)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = other.device_;
    release_ = std::exchange(other.release_, nullptr);
  }
  return *this;
}

void Buffer::reset() {
  if (release_) release_();
  release_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

Tensor Buffer::view(DType dtype, std::initializer_list<std::int64_t> dims, std::size_t offset_bytes) const {
  Tensor t(static_cast<char*>(data_) + offset_bytes, dtype, dims, device_);
  if (offset_bytes + t.bytes() > size_)
    fail("tensor {} of {} bytes at offset {} does not fit a buffer of {} bytes", t.shape_string(), t.bytes(),
         offset_bytes, size_);
  return t;
}

Buffer host_buffer(std::size_t bytes) {
  if (bytes == 0) return {};
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("out of memory allocating {} bytes", bytes);
  return Buffer(p, bytes, Device::kCpu, [p, bytes] { ::munmap(p, bytes); });
}

}  // namespace folio
