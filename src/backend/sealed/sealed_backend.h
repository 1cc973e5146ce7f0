// SealedBackend: another (host) backend's ops over memory the host cannot
// read, as a GPU's is. Every pointer it hands out - buffers, weights, the KV
// pool, workspaces - is sealed: bit 55 set, an address no host page has, so
// that any host read or write through it faults at once. Its ops unseal the
// tensors they are given (and refuse host pointers, which a GPU could not
// read either), then run the inner backend; copy_to_device and copy_to_host
// are the only way across. The engine tests run on it: a crash there is host
// code reading device memory. It also counts the bytes that cross.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/forwarding_backend.h"

namespace folio {

struct CrossingCounts {
  std::uint64_t to_device_bytes = 0;
  std::uint64_t to_host_bytes = 0;
  std::uint64_t to_device_copies = 0;
  std::uint64_t to_host_copies = 0;
};

class SealedBackend final : public ForwardingBackend {
 public:
  explicit SealedBackend(std::unique_ptr<Backend> inner);

  std::string name() const override { return "sealed"; }
  Device device() const override { return Device::kSealed; }
  std::string numerics() const override { return "sealed " + inner().numerics(); }
  // What crossed between host and device so far.
  const CrossingCounts& crossings() const { return crossings_; }

  Buffer allocate(std::size_t bytes) override;
  void copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const Tensor& src, std::size_t bytes) override;
  Buffer load_weight(Tensor& w) override;

 protected:
  // The tensor unsealed for the inner backend; a host pointer is refused.
  Tensor view(const Tensor& t, const char* what) override;

 private:
  CrossingCounts crossings_;
};

}  // namespace folio
