// The CUDA backend where this machine cannot run it: one test says why it is
// skipped (the op suite lists "cuda" only where a device is present); where
// it can, a few properties of the backend itself that the op suite does not
// see (its device, memory accounting, errors from device data at the sync).
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/backend_factory.h"
#include "core/error.h"
#include "support/op_suite.h"

namespace folio::testing {
namespace {

TEST(CudaBackend, IsUsableHere) {
  const std::string why = backend_unavailable("cuda");
  if (!why.empty()) GTEST_SKIP() << why;
  BackendOptions o;
  o.name = "cuda";
  auto be = make_backend(o);
  EXPECT_EQ(be->name(), "cuda");
  EXPECT_EQ(be->device(), Device::kCuda);
  EXPECT_EQ(be->activation_dtype(), DType::F32);
  // Buffers are zero-filled device memory; host buffers are pinned and readable.
  Buffer zeros = be->allocate(64);
  std::vector<std::int32_t> back(16, -1);
  be->copy_to_host(back.data(), zeros.view(DType::I32, {16}), 64);
  EXPECT_EQ(back, std::vector<std::int32_t>(16, 0));
  Buffer host = be->allocate_host(32);
  EXPECT_EQ(host.device(), Device::kCpu);
  // One op runs and gives its result.
  DeviceTensor x(*be, DType::F32, {2, 4});
  x.upload_floats({1, 2, 3, 4, 5, 6, 7, 8});
  be->scale(*x, 2.0f);
  EXPECT_EQ(x.download_floats(), (std::vector<float>{2, 4, 6, 8, 10, 12, 14, 16}));
  // A problem found in device data is thrown at the next sync, once.
  DeviceTensor rows(*be, DType::I32, {1}), out(*be, DType::F32, {1, 4});
  rows.upload_values(std::vector<std::int32_t>{7});
  be->gather_rows(*x, *rows, *out);
  EXPECT_THROW(be->synchronize(), Error);
  EXPECT_NO_THROW(be->synchronize());
  // Host memory handed to an op is refused, not read.
  std::vector<float> host_x(8);
  Tensor h(host_x.data(), DType::F32, {2, 4});
  EXPECT_THROW(be->scale(h, 2.0f), Error);
}

TEST(CudaBackend, NamedOnlyWhereBuilt) {
  const std::vector<std::string> names = backend_names();
  const bool listed = std::find(names.begin(), names.end(), "cuda") != names.end();
#if FOLIO_CUDA
  EXPECT_TRUE(listed);
#else
  EXPECT_FALSE(listed);
  BackendOptions o;
  o.name = "cuda";
  EXPECT_THROW(make_backend(o), Error);
#endif
}

}  // namespace
}  // namespace folio::testing
