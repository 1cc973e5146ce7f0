// The deferred backend keeps the promises a GPU stream keeps, and no more:
// calls run later, in order, on another thread; a copy from allocate_host
// memory reads it when it runs, any other source at once; queue points,
// copy_to_host and synchronize wait; errors come back at the sync; releasing
// a buffer waits for the calls that use it. Over a plain CPU backend here,
// so that a test can look at "device" memory and see what has run.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/deferred/deferred_backend.h"
#include "backend/forwarding_backend.h"
#include "core/error.h"

namespace folio {
namespace {

std::unique_ptr<DeferredBackend> deferred_cpu() { return std::make_unique<DeferredBackend>(std::make_unique<CpuBackend>(1)); }

std::vector<float> download(Backend& be, const Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  be.copy_to_host(out.data(), t, t.bytes());
  return out;
}

void fill(const Buffer& host, float value, std::size_t n) {
  auto* p = static_cast<float*>(host.data());
  for (std::size_t i = 0; i < n; ++i) p[i] = value;
}

TEST(DeferredBackend, OpsRunOnlyWhenTheHostWaitsInOrder) {
  auto be = deferred_cpu();
  Buffer x = be->allocate(4 * sizeof(float));
  const Tensor t = x.view(DType::F32, {1, 4});
  const std::vector<float> ones(4, 1.0f);
  be->copy_to_device(t, ones.data(), ones.size() * sizeof(float));
  Tensor y = t;
  be->scale(y, 3.0f);
  be->add(y, t);  // (1 * 3) + 3, in issue order
  // Nothing has run: the CPU backend's memory is still the zeros allocate made.
  const auto* raw = static_cast<const float*>(x.data());
  EXPECT_EQ(std::vector<float>(raw, raw + 4), std::vector<float>(4, 0.0f));
  EXPECT_EQ(download(*be, t), std::vector<float>(4, 6.0f));
}

TEST(DeferredBackend, ACopyFromStagingReadsItWhenItRuns) {
  auto be = deferred_cpu();
  Buffer staging = be->allocate_host(4 * sizeof(float));
  Buffer dev = be->allocate(4 * sizeof(float));
  const Tensor t = dev.view(DType::F32, {4});
  fill(staging, 1.0f, 4);
  be->copy_to_device(t, staging.data(), 4 * sizeof(float));
  fill(staging, 2.0f, 4);  // too early: the copy has not run
  EXPECT_EQ(download(*be, t), std::vector<float>(4, 2.0f));

  // Waiting for the copy's point first is what makes rewriting safe.
  fill(staging, 1.0f, 4);
  be->copy_to_device(t, staging.data(), 4 * sizeof(float));
  const QueuePoint copied = be->queue_point();
  be->wait_until(copied);
  fill(staging, 2.0f, 4);
  EXPECT_EQ(download(*be, t), std::vector<float>(4, 1.0f));
}

TEST(DeferredBackend, ACopyFromOtherHostMemoryReadsItAtOnce) {
  auto be = deferred_cpu();
  Buffer dev = be->allocate(4 * sizeof(float));
  const Tensor t = dev.view(DType::F32, {4});
  std::vector<float> values(4, 1.0f);
  be->copy_to_device(t, values.data(), values.size() * sizeof(float));
  values.assign(4, 2.0f);
  EXPECT_EQ(download(*be, t), std::vector<float>(4, 1.0f));
}

TEST(DeferredBackend, ReleasingStagingFirstRunsTheCopiesThatReadIt) {
  auto be = deferred_cpu();
  Buffer dev = be->allocate(4 * sizeof(float));
  const Tensor t = dev.view(DType::F32, {4});
  {
    Buffer staging = be->allocate_host(4 * sizeof(float));
    fill(staging, 5.0f, 4);
    be->copy_to_device(t, staging.data(), 4 * sizeof(float));
  }  // released here: the copy must have read it before
  EXPECT_EQ(download(*be, t), std::vector<float>(4, 5.0f));
}

TEST(DeferredBackend, AnOpsErrorComesBackAtTheNextSyncOnce) {
  auto be = deferred_cpu();
  Buffer a = be->allocate(8 * sizeof(float));
  Tensor x = a.view(DType::F32, {2, 4});
  const Tensor wrong = a.view(DType::F32, {1, 4});
  EXPECT_NO_THROW(be->add(x, wrong));  // shapes differ: the CPU backend throws, later
  EXPECT_THROW(be->synchronize(), Error);
  EXPECT_NO_THROW(be->synchronize());
  const std::vector<float> ones(8, 1.0f);
  be->copy_to_device(x, ones.data(), 8 * sizeof(float));
  EXPECT_EQ(download(*be, x), ones);
}

TEST(DeferredBackend, OpsRunOnAnotherThread) {
  // An inner backend that records the thread its scale runs on.
  std::thread::id ran_on;
  struct Probe final : ForwardingBackend {
    std::thread::id* id;
    Probe(std::unique_ptr<Backend> inner, std::thread::id* where) : ForwardingBackend(std::move(inner)), id(where) {}
    void scale(Tensor& x, float s) override {
      *id = std::this_thread::get_id();
      ForwardingBackend::scale(x, s);
    }
  };
  DeferredBackend over_probe(std::make_unique<Probe>(std::make_unique<CpuBackend>(1), &ran_on));
  Buffer a = over_probe.allocate(4 * sizeof(float));
  Tensor x = a.view(DType::F32, {4});
  over_probe.scale(x, 2.0f);
  over_probe.synchronize();
  EXPECT_NE(ran_on, std::thread::id());
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

}  // namespace
}  // namespace folio
