#include "backend/cuda/device_status.h"

#include <cuda_runtime_api.h>

#include <new>
#include <string>

#include "core/error.h"

namespace folio::cuda {
namespace {

std::string describe(const DeviceStatus& s) {
  switch (s.code) {
    case kErrEmbeddingId:
      return fmt::format("token id {} is outside the vocabulary of {}", s.a, s.b);
    case kErrGatherRow:
      return fmt::format("gather_rows: row {} is outside the {} rows of x", s.a, s.b);
    case kErrAttentionPosition:
      return fmt::format("attention: token {} is at position {} of a sequence of {} tokens", s.a, s.b, s.c);
    case kErrAttentionBlock:
      return fmt::format("attention: token {} reads cache block {} of {}; the block table is wrong", s.a, s.b, s.c);
    case kErrKvSlot:
      return fmt::format("write_kv: token {} has slot {} of a cache of {} slots", s.a, s.b, s.c);
    case kErrMoeExpertId:
      return fmt::format("moe_group: expert id {} is outside the {} experts", s.a, s.b);
    case kErrExpertRows:
      return fmt::format("expert_matmul: expert {} has rows [{}, {}), outside the {} rows given", s.a, s.b, s.c, s.d);
    case kErrCombineRow:
      return fmt::format("moe_combine: token {} reads row {} of {}", s.a, s.b, s.c);
    case kErrSampleLogitsRow:
      return fmt::format("sample: row {} reads logits row {} of {}", s.a, s.b, s.c);
    case kErrSampleAdjustRange:
      return fmt::format("sample: row {} has adjustments [{}, {}) out of range", s.a, s.b, s.c);
    case kErrSampleLogprobSlot:
      return fmt::format("sample: row {} puts its logprobs in slot {} of {}", s.a, s.b, s.c);
    case kErrSampleToken:
      return fmt::format(
          "sample: row {} names token {}, outside its row of {} logits; the request's tokens must "
          "come from the model's own vocabulary",
          s.a, s.b, s.c);
    case kErrSampleNoFinite:
      return fmt::format(
          "cannot sample row {}: every logit is -inf or NaN after logit_bias and penalties; the model "
          "produced invalid logits or logit_bias bans every token",
          s.a);
    case kErrSampleNoMass:
      return fmt::format(
          "cannot sample row {}: no token has a positive probability; the distribution is all zero "
          "or NaN",
          s.a);
    case kErrSampleLogprobsTop:
      return fmt::format(
          "cannot compute logprobs of row {}: its top logit is not finite; the model produced invalid "
          "logits",
          s.a);
    case kErrSampleMaskRow:
      return fmt::format("sample: row {} reads token mask {} of {}", s.a, s.b, s.c);
    default:
      return fmt::format("a kernel reported error code {} ({}, {}, {})", s.code, s.a, s.b, s.c);
  }
}

}  // namespace

DeviceStatusWord::DeviceStatusWord() {
  void* p = nullptr;
  if (cudaHostAlloc(&p, sizeof(DeviceStatus), cudaHostAllocMapped) != cudaSuccess)
    fail("CUDA backend: cannot allocate its pinned status word: {}", cudaGetErrorString(cudaGetLastError()));
  host_ = new (p) DeviceStatus();
  void* d = nullptr;
  if (cudaHostGetDevicePointer(&d, p, 0) != cudaSuccess)
    fail("CUDA backend: cannot map its status word into the device: {}", cudaGetErrorString(cudaGetLastError()));
  device_ = static_cast<DeviceStatus*>(d);
}

DeviceStatusWord::~DeviceStatusWord() { cudaFreeHost(host_); }

void DeviceStatusWord::check() {
  const volatile DeviceStatus* s = host_;
  if (s->code == 0) return;
  DeviceStatus copy;
  copy.code = s->code;
  copy.a = s->a;
  copy.b = s->b;
  copy.c = s->c;
  copy.d = s->d;
  *host_ = DeviceStatus();
  fail("{}", describe(copy));
}

}  // namespace folio::cuda
