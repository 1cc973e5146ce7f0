// The sampling op on the GPU: one block per row, RowSampler's definition
// (backend/sampling/row_sampler.h) step by step. Bias and penalties are
// applied to a copy of the row; greedy is the first argmax; otherwise the
// kept set is top-k and top-p over the tokens in rank order (listed chunk by
// chunk by a radix select and a sort, the masses summed one by one in that
// order) and min-p, the weights softmax_exp's, the divisor and the total
// their lane sums, and the draw a walk in id order: the host's bits. Where
// the host sums in an order its standard library chooses (top-k above 512
// with top-p, nuclei above 4,096 tokens), this sums in rank order, which can
// differ only when the cut falls within a rounding of the target; logprobs
// use CUDA's log(), within an ulp of the host's in double before the float
// rounding. A row reads only its own record and logits.
#include <climits>
#include <cstdint>

#include "backend/cuda/kernels.h"
#include "backend/cuda/launch_check.h"
#include "backend/cuda/sampling_device.cuh"

namespace folio::cuda {
namespace {

using namespace sampling;

// The largest logit_key of the row, every thread getting it.
template <typename ValueAt>
__device__ std::int32_t block_max_key(std::int64_t n, ValueAt value, Shared& sh) {
  std::int32_t best = INT_MIN;
  for (std::int64_t i = threadIdx.x; i < n; i += kThreads) best = max(best, logit_key(value(i)));
  const std::uint64_t ordered = static_cast<std::uint32_t>(best) ^ 0x80000000u;  // ascending with best
  const std::uint64_t m = block_min(~ordered, sh);
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(~m) ^ 0x80000000u);
}

// Walks the first `limit` tokens of the row in rank order. Returns the sum of
// their weights, added one by one; when counting, instead stops at the first
// token whose mass before it is not below target: count is its rank (limit
// when none), last the key of the token before it.
struct Walked {
  double mass;
  std::int64_t count;
  std::uint64_t last;
};

__device__ Walked rank_walk(const float* P, std::int64_t V, float max_logit, float temperature, std::int64_t limit,
                            bool counting, double target, Shared& sh) {
  auto key_at = [P](std::int64_t i) { return rank_key(P[i], i); };
  if (threadIdx.x == 0) {
    sh.mass = 0.0;
    sh.found = -1;
    sh.last_key = 0;
  }
  __syncthreads();
  bool has_lower = false;
  std::uint64_t lower = 0;
  std::int64_t done = 0;
  while (done < limit) {
    const std::int64_t n = min(static_cast<std::int64_t>(kChunk), limit - done);
    const std::uint64_t upper = select_rank(V, key_at, has_lower, lower, n, sh);
    const int m = sorted_chunk(V, key_at, has_lower, lower, upper, sh);
    if (threadIdx.x == 0) {
      double mass = sh.mass;
      for (int j = 0; j < m; ++j) {
        const std::uint64_t key = sh.keys[j];
        if (counting && !(mass < target)) {
          sh.found = done + j;
          break;
        }
        mass =
            __dadd_rn(mass, static_cast<double>(softmax_weight(rank_value(P[rank_id(key)]), max_logit, temperature)));
        sh.last_key = key;
      }
      sh.mass = mass;
    }
    __syncthreads();
    if (sh.found >= 0 || m == 0) break;
    done += m;
    has_lower = true;
    lower = upper;
  }
  const Walked w{sh.mass, sh.found >= 0 ? sh.found : limit, sh.last_key};
  __syncthreads();
  return w;
}

// RowSampler's walk: the first token (in id order) whose running sum of
// positive weights passes target; warp 0 skips 32 zeros at a time.
__device__ std::int32_t walk(const float* probs, std::int64_t V, double target, Shared& sh) {
  if (threadIdx.x < 32) {
    const int lane = static_cast<int>(threadIdx.x);
    double cum = 0.0;
    std::int64_t last = -1;
    bool done = false;
    for (std::int64_t base = 0; base < V && !done; base += 32) {
      const std::int64_t i = base + lane;
      const float v = i < V ? probs[i] : 0.0f;
      unsigned int mask = __ballot_sync(0xffffffffu, is_positive_finite(v));
      while (mask != 0) {
        const int b = __ffs(static_cast<int>(mask)) - 1;
        const float vb = __shfl_sync(0xffffffffu, v, b);
        cum = __dadd_rn(cum, static_cast<double>(vb));
        last = base + b;
        if (cum > target) {
          done = true;
          break;
        }
        mask &= mask - 1;
      }
    }
    if (lane == 0) sh.found = last;
  }
  __syncthreads();
  const auto token = static_cast<std::int32_t>(sh.found);
  __syncthreads();
  return token;
}

// A non-greedy row: the distribution of the kept tokens in `dense`, then the
// draw (or the verification of the row's draft). False on an error reported.
__device__ bool draw(const float* P, std::int64_t V, const SamplingRowParams& p, float* dense, Shared& sh,
                     DeviceStatus* status, std::int64_t r, std::int32_t& token, std::int32_t& accepted) {
  const float T = p.temperature;
  float mx = -INFINITY;
  for (std::int64_t i = threadIdx.x; i < V; i += kThreads) mx = fmaxf(mx, P[i]);
  mx = block_max(mx, sh);
  if (!isfinite(mx)) {
    if (threadIdx.x == 0) report(status, kErrSampleNoFinite, r, 0, 0);
    return false;
  }
  const bool top_k = p.top_k > 0 && p.top_k < V;
  const bool top_p = p.top_p < 1.0f;
  auto key_at = [P](std::int64_t i) { return rank_key(P[i], i); };
  auto weight_at = [P, mx, T](std::int64_t i) { return softmax_weight(P[i], mx, T); };
  bool all = !top_k && !top_p, none = false;
  std::uint64_t cut = ~std::uint64_t{0};
  if (top_k && !top_p) {
    cut = select_rank(V, key_at, false, 0, p.top_k, sh);
  } else if (!all) {
    const std::int64_t limit = top_k ? p.top_k : V;
    const double total = top_k ? rank_walk(P, V, mx, T, limit, false, 0.0, sh).mass : lane_sum(V, weight_at, sh);
    const Walked w = rank_walk(P, V, mx, T, limit, true, static_cast<double>(p.top_p) * total, sh);
    none = w.count == 0;
    cut = w.last;
  }
  for (std::int64_t i = threadIdx.x; i < V; i += kThreads) {
    const float w = weight_at(i);
    const bool keep = !none && (all || key_at(i) <= cut) && w > 0.0f && w >= p.min_p;
    dense[i] = keep ? w : 0.0f;
  }
  __syncthreads();
  auto dense_at = [dense](std::int64_t i) { return dense[i]; };
  const auto divisor = static_cast<float>(lane_sum(V, dense_at, sh));
  for (std::int64_t i = threadIdx.x; i < V; i += kThreads) dense[i] = __fdiv_rn(dense[i], divisor);
  __syncthreads();
  Rng rng{p.rng_state};
  if (p.draft_token >= 0) {
    const float pd = dense[p.draft_token];
    if (rng.uniform() < static_cast<double>(pd)) {
      token = p.draft_token;
      accepted = 1;
      return true;
    }
    __syncthreads();
    if (threadIdx.x == 0) dense[p.draft_token] = 0.0f;
    __syncthreads();
  }
  const double total = lane_sum(V, dense_at, sh);
  if (!(total > 0.0)) {
    if (threadIdx.x == 0) report(status, kErrSampleNoMass, r, 0, 0);
    return false;
  }
  token = walk(dense, V, rng.uniform() * total, sh);
  return true;
}

// RowSampler::fill_logprobs: log_softmax of the raw row.
__device__ void fill_logprobs(const float* raw, std::int64_t V, std::int32_t token, int num, LogprobResult* out,
                              Shared& sh, DeviceStatus* status, std::int64_t r) {
  const std::int32_t best = block_max_key(
      V, [raw](std::int64_t i) { return raw[i]; }, sh);
  const float mx = best == INT_MIN ? -INFINITY : from_logit_key(best);
  if (!isfinite(mx)) {
    if (threadIdx.x == 0) report(status, kErrSampleLogprobsTop, r, 0, 0);
    return;
  }
  const double log_sum = log(lane_sum(
      V, [raw, mx](std::int64_t i) { return softmax_exp(__fsub_rn(raw[i], mx)); }, sh));
  auto logprob = [mx, log_sum](float logit) {
    return __double2float_rn(__dsub_rn(static_cast<double>(__fsub_rn(rank_value(logit), mx)), log_sum));
  };
  const int k = static_cast<int>(min(static_cast<std::int64_t>(min(max(num, 0), kMaxLogprobs)), V));
  if (threadIdx.x == 0) {
    out->logprob = logprob(raw[token]);
    out->num_top = k;
  }
  std::uint64_t previous = 0;
  for (int j = 0; j < k; ++j) {
    std::uint64_t mine = ~std::uint64_t{0};
    for (std::int64_t i = threadIdx.x; i < V; i += kThreads) {
      const std::uint64_t key = rank_key(raw[i], i);
      if ((j == 0 || key > previous) && key < mine) mine = key;
    }
    previous = block_min(mine, sh);
    if (threadIdx.x == 0) {
      const std::int32_t id = rank_id(previous);
      out->top[j].token = id;
      out->top[j].logprob = logprob(raw[id]);
    }
  }
}

__global__ void __launch_bounds__(kThreads) sample_kernel(SampleLaunch a) {
  __shared__ Shared sh;
  const std::int64_t r = blockIdx.x, V = a.vocab;
  const SamplingRowParams p = a.rows[r];
  const bool lead = threadIdx.x == 0;
  if (p.logits_row < 0 || p.logits_row >= a.logits_rows) {
    if (lead) report(a.status, kErrSampleLogitsRow, r, p.logits_row, a.logits_rows);
    return;
  }
  if (p.adjust_begin < 0 || p.adjust_begin > p.adjust_end || p.adjust_end > a.num_adjustments) {
    if (lead) report(a.status, kErrSampleAdjustRange, r, p.adjust_begin, p.adjust_end);
    return;
  }
  const bool wants_logprobs = p.num_logprobs >= 0;
  if (wants_logprobs && (p.logprob_slot < 0 || p.logprob_slot >= a.num_logprob_rows)) {
    if (lead) report(a.status, kErrSampleLogprobSlot, r, p.logprob_slot, a.num_logprob_rows);
    return;
  }
  bool bad = false;
  for (std::int64_t j = p.adjust_begin + threadIdx.x; j < p.adjust_end; j += kThreads) {
    const std::int32_t t = a.adjustments[j].token;
    if (t < 0 || t >= V) {
      bad = true;
      report(a.status, kErrSampleToken, r, t, V);
    }
  }
  if (__syncthreads_or(bad)) return;
  if (p.draft_token >= V) {
    if (lead) report(a.status, kErrSampleToken, r, p.draft_token, V);
    return;
  }
  if (p.mask_row < -1 || p.mask_row >= a.num_masks) {
    if (lead) report(a.status, kErrSampleMaskRow, r, p.mask_row, a.num_masks);
    return;
  }
  const float* raw = a.logits + p.logits_row * V;
  float* work = a.scratch + r * kSampleScratchRows * V;
  float* dense = work + V;
  if (p.mask_row >= 0) {
    // RowSampler::masked: a forbidden token's logit is -inf before anything
    // else, and the row is those logits from then on, logprobs included.
    float* masked = work + 2 * V;
    const std::uint32_t* m = a.masks + p.mask_row * a.mask_words;
    for (std::int64_t i = threadIdx.x; i < V; i += kThreads)
      masked[i] = ((m[i >> 5] >> (i & 31)) & 1u) != 0 ? raw[i] : -INFINITY;
    __syncthreads();
    raw = masked;
  }
  const float* P = raw;
  if (p.adjust_end > p.adjust_begin) {
    for (std::int64_t i = threadIdx.x; i < V; i += kThreads) work[i] = raw[i];
    __syncthreads();
    // Per token the host Sampler's order: bias, repetition, then the OpenAI
    // penalties; at most one adjustment per token, so no two threads meet.
    const bool repetition = p.repetition_penalty != 1.0f;
    const bool openai = p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
    for (std::int64_t j = p.adjust_begin + threadIdx.x; j < p.adjust_end; j += kThreads) {
      const LogitAdjustment adj = a.adjustments[j];
      float l = work[adj.token];
      if (adj.has_bias != 0) l = __fadd_rn(l, adj.bias);
      if (repetition && (adj.output_count > 0 || adj.in_prompt != 0))
        l = l > 0.0f ? __fdiv_rn(l, p.repetition_penalty) : __fmul_rn(l, p.repetition_penalty);
      if (openai && adj.output_count > 0) {
        l = __fsub_rn(l, __fmul_rn(p.frequency_penalty, static_cast<float>(adj.output_count)));
        l = __fsub_rn(l, p.presence_penalty);
      }
      work[adj.token] = l;
    }
    __syncthreads();
    P = work;
  }
  std::int32_t token = -1, accepted = 0;
  if (p.temperature < kGreedyTemperature) {
    const std::int32_t best = block_max_key(
        V, [P](std::int64_t i) { return P[i]; }, sh);
    const float best_logit = from_logit_key(best);
    if (best == INT_MIN || best_logit == -INFINITY) {
      if (lead) report(a.status, kErrSampleNoFinite, r, 0, 0);
      return;
    }
    std::uint64_t first = ~std::uint64_t{0};
    for (std::int64_t i = threadIdx.x; i < V; i += kThreads)
      if (P[i] == best_logit && static_cast<std::uint64_t>(i) < first) first = static_cast<std::uint64_t>(i);
    token = static_cast<std::int32_t>(block_min(first, sh));
    accepted = p.draft_token >= 0 && token == p.draft_token ? 1 : 0;
  } else if (!draw(P, V, p, dense, sh, a.status, r, token, accepted)) {
    return;
  }
  if (lead) {
    a.results[r].token = token;
    a.results[r].accepted = accepted;
  }
  if (wants_logprobs) fill_logprobs(raw, V, token, p.num_logprobs, a.logprobs + p.logprob_slot, sh, a.status, r);
}

}  // namespace

void launch_sample(const SampleLaunch& a, cudaStream_t stream) {
  if (a.num_rows == 0) return;
  check_grid(a.num_rows, "sample");
  sample_kernel<<<static_cast<unsigned>(a.num_rows), kThreads, 0, stream>>>(a);
  check_launch("sample");
}

}  // namespace folio::cuda
