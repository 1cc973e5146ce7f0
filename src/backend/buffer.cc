#include "backend/buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace folio {

namespace {

// Anonymous mappings come zeroed and are committed page by page as they are
// touched, so a large KV pool costs memory only where tokens are written.
void* map_zeroed(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

Buffer::Buffer(std::size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  data_ = map_zeroed(bytes);
  if (data_ == nullptr) fail("out of memory allocating {} bytes", bytes);
}

Buffer::~Buffer() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), device_(other.device_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = other.device_;
  }
  return *this;
}

Tensor Buffer::view(DType dtype, std::initializer_list<std::int64_t> dims, std::size_t offset_bytes) const {
  Tensor t(static_cast<char*>(data_) + offset_bytes, dtype, dims, device_);
  if (offset_bytes + t.bytes() > size_)
    fail("tensor {} of {} bytes at offset {} does not fit a buffer of {} bytes", t.shape_string(), t.bytes(),
         offset_bytes, size_);
  return t;
}

}  // namespace folio
