#include "backend/sealed/sealed_backend.h"

#include <cstring>
#include <memory>
#include <utility>

#include "core/error.h"

namespace folio {
namespace {

// Bit 55 is above every host address (user space ends below 2^47, or 2^56
// with five-level paging for mappings that ask for it) and below the top
// byte that some processors ignore, so a sealed pointer never reaches a page.
constexpr std::uintptr_t kSealBit = std::uintptr_t{1} << 55;

void* seal(void* p) { return p == nullptr ? p : reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) | kSealBit); }

Tensor sealed(Tensor t) {
  t.data = seal(t.data);
  t.device = Device::kSealed;
  return t;
}

}  // namespace

SealedBackend::SealedBackend(std::unique_ptr<Backend> inner) : ForwardingBackend(std::move(inner)) {
  FOLIO_CHECK(this->inner().device() == Device::kCpu);
}

// A tensor that is not sealed is host memory handed to a device op, which a
// GPU could not read either.
Tensor SealedBackend::view(const Tensor& t, const char* what) {
  Tensor u = t;
  u.device = Device::kCpu;
  if (t.data == nullptr || t.numel() == 0) {
    u.data = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(t.data) & ~kSealBit);
    return u;
  }
  const auto bits = reinterpret_cast<std::uintptr_t>(t.data);
  if ((bits & kSealBit) == 0 || t.device != Device::kSealed)
    fail("sealed backend: {} {} is host memory, not the device's; make device tensors with allocate and "
         "copy_to_device",
         what, t.shape_string());
  u.data = reinterpret_cast<void*>(bits & ~kSealBit);
  return u;
}

Buffer SealedBackend::allocate(std::size_t bytes) {
  auto real = std::make_shared<Buffer>(inner().allocate(bytes));
  return Buffer(seal(real->data()), real->size(), Device::kSealed, [real]() mutable { real.reset(); });
}

void SealedBackend::copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) {
  crossings_.to_device_bytes += bytes;
  ++crossings_.to_device_copies;
  ForwardingBackend::copy_to_device(dst, src, bytes);
}

void SealedBackend::copy_to_host(void* dst, const Tensor& src, std::size_t bytes) {
  crossings_.to_host_bytes += bytes;
  ++crossings_.to_host_copies;
  ForwardingBackend::copy_to_host(dst, src, bytes);
}

// The inner backend's copy (its own layout), or, where it would read the
// host memory w came in, a copy of those bytes; sealed either way.
Buffer SealedBackend::load_weight(Tensor& w) {
  if (w.device != Device::kCpu) fail("sealed backend: weight {} must come from host memory", w.shape_string());
  Buffer own = inner().load_weight(w);
  if (own.empty()) {
    own = inner().allocate(w.bytes());
    std::memcpy(own.data(), w.data, w.bytes());
    w.data = own.data();
  }
  auto real = std::make_shared<Buffer>(std::move(own));
  w = sealed(w);
  return Buffer(seal(real->data()), real->size(), Device::kSealed, [real]() mutable { real.reset(); });
}

}  // namespace folio
