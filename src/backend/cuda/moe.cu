// The mixture-of-experts ops around expert_matmul (which is matmul.cu's
// kernel over expert row ranges): routing, grouping by expert, combining in
// rank order, and the check of the group offsets. Every count stays on the
// device. Routing and combining are one thread per token or output number,
// in the reference's order, so they give its bits except where CUDA's expf
// rounds differently from the host's.
#include <cstdint>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch_check.h"

namespace folio::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t items) { return static_cast<unsigned>((items + kThreads - 1) / kThreads); }

// One thread per token: the softmax over its router logits, then the k most
// probable experts, best first, ties to the lower id.
__global__ void moe_route_kernel(const void* logits, int kind, std::int64_t tokens, std::int64_t experts,
                                 std::int64_t k, bool normalize, std::int32_t* ids, float* weights) {
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  const std::int64_t base = t * experts;
  float max_logit = -INFINITY;
  for (std::int64_t e = 0; e < experts; ++e) max_logit = fmaxf(max_logit, load_act(logits, base + e, kind));
  float sum = 0.0f;
  for (std::int64_t e = 0; e < experts; ++e)
    sum = __fadd_rn(sum, expf(__fsub_rn(load_act(logits, base + e, kind), max_logit)));
  auto prob = [&](std::int64_t e) {
    return __fdiv_rn(expf(__fsub_rn(load_act(logits, base + e, kind), max_logit)), sum);
  };
  std::int32_t* id = ids + t * k;
  float* w = weights + t * k;
  float chosen = 0.0f;
  for (std::int64_t r = 0; r < k; ++r) {
    std::int64_t best = -1;
    float best_prob = 0.0f;
    for (std::int64_t e = 0; e < experts; ++e) {
      bool taken = false;
      for (std::int64_t q = 0; q < r; ++q) taken = taken || id[q] == e;
      if (taken) continue;
      const float p = prob(e);
      if (best < 0 || p > best_prob) {
        best = e;
        best_prob = p;
      }
    }
    id[r] = static_cast<std::int32_t>(best);
    w[r] = best_prob;
    chosen = __fadd_rn(chosen, best_prob);
  }
  if (normalize)
    for (std::int64_t r = 0; r < k; ++r) w[r] = __fdiv_rn(w[r], chosen);
}

// One block: counts per expert (offsets[e + 1]), their prefix sums, then per
// expert its assignments in (token, rank) order. Each thread owns experts
// tid, tid + blockDim, ..., so no order depends on scheduling.
__global__ void moe_group_kernel(const std::int32_t* ids, std::int64_t n, std::int64_t k, std::int64_t experts,
                                 std::int32_t* offsets, std::int32_t* row_tokens, std::int32_t* assignment_rows,
                                 DeviceStatus* status) {
  for (std::int64_t a = threadIdx.x; a < n; a += blockDim.x)
    if (ids[a] < 0 || ids[a] >= experts) report(status, kErrMoeExpertId, ids[a], experts, 0);
  for (std::int64_t e = threadIdx.x; e < experts; e += blockDim.x) {
    std::int32_t count = 0;
    for (std::int64_t a = 0; a < n; ++a) count += ids[a] == e ? 1 : 0;
    offsets[e + 1] = count;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    offsets[0] = 0;
    for (std::int64_t e = 0; e < experts; ++e) offsets[e + 1] += offsets[e];
  }
  __syncthreads();
  for (std::int64_t e = threadIdx.x; e < experts; e += blockDim.x) {
    std::int32_t next = offsets[e];
    for (std::int64_t a = 0; a < n; ++a) {
      if (ids[a] != e) continue;
      row_tokens[next] = static_cast<std::int32_t>(a / k);
      assignment_rows[a] = next++;
    }
  }
}

__global__ void moe_combine_kernel(const void* y, std::int64_t y_rows, const std::int32_t* assignment_rows,
                                   const float* weights, std::int64_t tokens, std::int64_t k, std::int64_t d, void* out,
                                   int kind, DeviceStatus* status) {
  const std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= tokens * d) return;
  const std::int64_t t = item / d, c = item % d;
  float o = 0.0f;
  for (std::int64_t r = 0; r < k; ++r) {
    const std::int32_t row = assignment_rows[t * k + r];
    if (row < 0 || row >= y_rows) {
      if (c == 0) report(status, kErrCombineRow, t, row, y_rows);
      return;
    }
    o = __fadd_rn(o, __fmul_rn(weights[t * k + r], load_act(y, row * d + c, kind)));
  }
  store_act(out, item, kind, o);
}

__global__ void check_offsets_kernel(const std::int32_t* offsets, std::int64_t experts, std::int64_t rows,
                                     DeviceStatus* status) {
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t begin = offsets[e], end = offsets[e + 1];
    if (begin < 0 || begin > end || end > rows) {
      if (atomicCAS(&status->code, 0, -1) == 0) {
        status->a = e;
        status->b = begin;
        status->c = end;
        status->d = rows;
        __threadfence_system();
        atomicExch(&status->code, kErrExpertRows);
      }
      return;
    }
  }
}

// One thread per token, DeepSeek's router (backend.h, GroupedRouting), in
// the reference's order: scores, choice scores, group scores recomputed per
// group, then the top-k of the kept groups, ties to the lower id.
__global__ void moe_route_grouped_kernel(const void* logits, int kind, const float* bias, std::int64_t tokens,
                                         std::int64_t experts, std::int64_t k, GroupedRouting routing,
                                         std::int32_t* ids, float* weights) {
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  const std::int64_t base = t * experts, per_group = experts / routing.num_groups;
  float max_logit = -INFINITY, sum = 0.0f;
  if (!routing.sigmoid) {
    for (std::int64_t e = 0; e < experts; ++e) max_logit = fmaxf(max_logit, load_act(logits, base + e, kind));
    for (std::int64_t e = 0; e < experts; ++e)
      sum = __fadd_rn(sum, expf(__fsub_rn(load_act(logits, base + e, kind), max_logit)));
  }
  auto score = [&](std::int64_t e) {
    const float x = load_act(logits, base + e, kind);
    return routing.sigmoid ? __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x))) : __fdiv_rn(expf(__fsub_rn(x, max_logit)), sum);
  };
  auto choice = [&](std::int64_t e) { return bias != nullptr ? __fadd_rn(score(e), bias[e]) : score(e); };
  auto group_score = [&](std::int64_t g) {
    float first = -INFINITY, second = -INFINITY;
    for (std::int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
      const float c = choice(e);
      if (c > first) {
        second = first;
        first = c;
      } else if (c > second) {
        second = c;
      }
    }
    return routing.group_top2 ? __fadd_rn(first, second) : first;
  };
  auto kept = [&](std::int64_t e) {
    const std::int64_t g = e / per_group;
    const float mine = group_score(g);
    std::int64_t better = 0;
    for (std::int64_t o = 0; o < routing.num_groups; ++o) {
      const float other = group_score(o);
      if (other > mine || (other == mine && o < g)) ++better;
    }
    return better < routing.groups_used;
  };
  std::int32_t* id = ids + t * k;
  float* w = weights + t * k;
  float chosen = 0.0f;
  for (std::int64_t r = 0; r < k; ++r) {
    std::int64_t best = -1;
    float best_choice = 0.0f;
    for (std::int64_t e = 0; e < experts; ++e) {
      bool taken = false;
      for (std::int64_t q = 0; q < r; ++q) taken = taken || id[q] == e;
      if (taken || !kept(e)) continue;
      const float c = choice(e);
      if (best < 0 || c > best_choice) {
        best = e;
        best_choice = c;
      }
    }
    id[r] = static_cast<std::int32_t>(best);
    w[r] = score(best);
    chosen = __fadd_rn(chosen, w[r]);
  }
  for (std::int64_t r = 0; r < k; ++r)
    w[r] = __fmul_rn(routing.normalize ? __fdiv_rn(w[r], chosen) : w[r], routing.scale);
}

}  // namespace

void launch_moe_route_grouped(const void* logits, int kind, const float* bias, std::int64_t tokens,
                              std::int64_t experts, std::int64_t k, const GroupedRouting& routing, std::int32_t* ids,
                              float* weights, cudaStream_t stream) {
  if (tokens == 0) return;
  moe_route_grouped_kernel<<<blocks_for(tokens), kThreads, 0, stream>>>(logits, kind, bias, tokens, experts, k,
                                                                        routing, ids, weights);
  check_launch("moe_route_grouped");
}

void launch_moe_route(const void* logits, int kind, std::int64_t tokens, std::int64_t experts, std::int64_t k,
                      bool normalize, std::int32_t* ids, float* weights, cudaStream_t stream) {
  if (tokens == 0) return;
  moe_route_kernel<<<blocks_for(tokens), kThreads, 0, stream>>>(logits, kind, tokens, experts, k, normalize, ids,
                                                                weights);
  check_launch("moe_route");
}

void launch_moe_group(const std::int32_t* ids, std::int64_t n, std::int64_t k, std::int64_t experts,
                      std::int32_t* offsets, std::int32_t* row_tokens, std::int32_t* assignment_rows,
                      DeviceStatus* status, cudaStream_t stream) {
  moe_group_kernel<<<1, kThreads, 0, stream>>>(ids, n, k, experts, offsets, row_tokens, assignment_rows, status);
  check_launch("moe_group");
}

void launch_moe_combine(const void* y, std::int64_t y_rows, const std::int32_t* assignment_rows, const float* weights,
                        std::int64_t tokens, std::int64_t k, std::int64_t d, void* out, int kind, DeviceStatus* status,
                        cudaStream_t stream) {
  if (tokens * d == 0) return;
  moe_combine_kernel<<<blocks_for(tokens * d), kThreads, 0, stream>>>(y, y_rows, assignment_rows, weights, tokens, k, d,
                                                                      out, kind, status);
  check_launch("moe_combine");
}

void launch_check_expert_offsets(const std::int32_t* offsets, std::int64_t experts, std::int64_t rows,
                                 DeviceStatus* status, cudaStream_t stream) {
  check_offsets_kernel<<<1, 1, 0, stream>>>(offsets, experts, rows, status);
  check_launch("expert_matmul offsets");
}

}  // namespace folio::cuda
