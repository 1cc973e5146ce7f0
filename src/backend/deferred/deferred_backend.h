// DeferredBackend: another backend's ops and copies run later, in the order
// they were issued, on a worker thread (WorkStream) - as a GPU runs its
// stream, and as late as the Backend contract lets them: nothing runs until
// the host waits (copy_to_host, synchronize, wait_until, a buffer's release).
// A copy_to_device from allocate_host memory reads its source when it runs,
// not when it is issued; any other source is read at once (as CUDA reads
// pageable memory). Host code that rewrites staging which a queued copy
// still reads thus sends the wrong bytes here as on a GPU, and the engine
// suite runs on it to prove it does not (docs/architecture.md rule 8). An error an op
// throws comes back from the next copy_to_host or synchronize.
#pragma once

#include <memory>
#include <string>

#include "backend/forwarding_backend.h"

namespace folio {

class DeferredBackend final : public ForwardingBackend {
 public:
  explicit DeferredBackend(std::unique_ptr<Backend> inner);
  ~DeferredBackend() override;

  std::string name() const override { return "deferred"; }

  Buffer allocate(std::size_t bytes) override;
  Buffer allocate_host(std::size_t bytes) override;
  void copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const Tensor& src, std::size_t bytes) override;
  void synchronize() override;
  QueuePoint queue_point() override;
  void wait_until(QueuePoint point) override;
  Buffer load_weight(Tensor& w) override;

 protected:
  void issue(std::function<void()> op) override;

 private:
  struct State;
  // Memory the inner backend made, released once every queued call has run
  // (as cudaFree waits for the device).
  Buffer released_after_queue(Buffer inner);

  std::shared_ptr<State> state_;  // shared with the buffers' release
};

}  // namespace folio
