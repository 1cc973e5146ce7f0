// The CUDA kernels' arithmetic, checked on the host where no GPU is: the
// headers the kernels include (number_formats.cuh, dequant.cuh,
// sampling_math.cuh) compile for the host too, so every GGUF block decoder,
// every number conversion, the KV row encodings and the sampling op's
// exponential, keys and draws are compared bit for bit with the reference's.
// A last test runs the sampling kernel's algorithm (kept set by rank, lane
// sums, the walk) as plain host code against RowSampler over the op suite's
// kinds of rows: what the kernel computes is RowSampler's definition. The
// kernels themselves run in the op suite on a GPU (scripts/gpu_check.sh).
#include <gtest/gtest.h>

#if FOLIO_CUDA

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/glu_math.cuh"
#include "backend/cuda/rope_math.cuh"
#include "backend/reference/reference_backend.h"
#include "backend/cuda/sampling_math.cuh"
#include "backend/sampling/row_sampler.h"
#include "backend/sampling/sampler_math.h"
#include "support/op_suite.h"
#include "tensor/fp8.h"
#include "tensor/half.h"
#include "tensor/kv_dtype.h"
#include "tensor/quantize.h"

namespace folio::testing {
namespace {

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

std::vector<float> awkward_floats(std::mt19937& rng, std::size_t n) {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          65504.0f,
                          65520.0f,
                          1e-8f,
                          -6e-8f,
                          448.0f,
                          464.0f,
                          0x1p-6f,
                          0x1p-10f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min(),
                          3.0e38f};
  std::uniform_int_distribution<std::uint32_t> any;
  std::normal_distribution<float> normal(0.0f, 3.0f);
  while (v.size() < n) {
    v.push_back(normal(rng));
    v.push_back(std::bit_cast<float>(any(rng)));  // every exponent, NaNs included
  }
  return v;
}

TEST(CudaMath, EveryBlockDecoderGivesTheReferencesFloats) {
  std::mt19937 rng(2);
  for (DType type : weight_types()) {
    ASSERT_TRUE(cuda::is_kernel_weight_type(type)) << name(type);
    const std::int64_t rows = 6;
    const std::int64_t k = is_float(type) ? 37 : is_kquant(type) ? 512 : info(type).block_elems == 64 ? 192 : 96;
    std::vector<std::uint8_t> w(static_cast<std::size_t>(row_bytes(type, k) * rows));
    fill_weights(type, rows, k, w.data(), rng);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::uint8_t* row = w.data() + r * row_bytes(type, k);
      std::vector<float> want(static_cast<std::size_t>(k)), got(static_cast<std::size_t>((k + 31) / 32 * 32));
      dequantize_row(type, row, want.data(), k);
      for (std::int64_t s = 0; s < (k + 31) / 32; ++s) cuda::dequant32_any(type, row, s, k, got.data() + 32 * s);
      for (std::int64_t i = 0; i < k; ++i)
        ASSERT_EQ(bits(got[i]), bits(want[i])) << name(type) << " row " << r << " element " << i;
      for (std::size_t i = static_cast<std::size_t>(k); i < got.size(); ++i) EXPECT_EQ(got[i], 0.0f) << "tail";
    }
  }
}

TEST(CudaMath, ConversionsGiveTheReferencesBits) {
  std::mt19937 rng(3);
  for (float x : awkward_floats(rng, 200000)) {
    ASSERT_EQ(cuda::f32_to_f16_bits(x), f32_to_f16(x)) << x << " (bits " << bits(x) << ")";
    ASSERT_EQ(cuda::f32_to_bf16_bits(x), f32_to_bf16(x)) << x;
    ASSERT_EQ(cuda::f32_to_fp8_e4m3(x), f32_to_fp8_e4m3(x)) << x;
  }
  for (int c = 0; c < 256; ++c) {
    const float want = fp8_e4m3_to_f32(static_cast<std::uint8_t>(c));
    const float got = cuda::fp8_e4m3_to_f32(static_cast<std::uint8_t>(c));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << c;
    else
      EXPECT_EQ(bits(got), bits(want)) << c;
  }
  for (int h = 0; h < 65536; ++h) {
    const float want = f16_to_f32(static_cast<std::uint16_t>(h));
    const float got = cuda::f16_bits_to_f32(static_cast<std::uint16_t>(h));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << h;
    else
      ASSERT_EQ(bits(got), bits(want)) << h;
    ASSERT_EQ(bits(cuda::bf16_bits_to_f32(static_cast<std::uint16_t>(h))),
              bits(bf16_to_f32(static_cast<std::uint16_t>(h))));
  }
}

// write_kv's per-row arithmetic (attention.cu), as plain loops: block or row
// maxima, the scale rule, the codes.
TEST(CudaMath, KvRowEncodingsGiveTheReferencesBytes) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::int64_t dim = 32 * (1 + trial % 8);
    std::vector<float> x = random_floats(static_cast<std::size_t>(dim), rng, trial % 3 == 0 ? 1e-6f : 4.0f);
    if (trial % 7 == 0) x[3] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 11 == 0) std::fill(x.begin(), x.begin() + 32, 0.0f);
    std::vector<std::int8_t> q8(static_cast<std::size_t>(dim)), q8_want(q8.size());
    std::vector<std::uint16_t> s8(static_cast<std::size_t>(dim / 32)), s8_want(s8.size());
    for (std::int64_t b = 0; b < dim / 32; ++b) {
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fmax(0.0f, std::fabs(x[32 * b + i])));
      const cuda::KvScale sc = cuda::kv_scale_for(amax, 127.0f);
      s8[b] = sc.bits;
      for (int i = 0; i < 32; ++i) q8[32 * b + i] = cuda::to_q8(cuda::mul_rn(x[32 * b + i], sc.inverse));
    }
    encode_kv_row(KvDType::kQ8_0, x.data(), dim, q8_want.data(), s8_want.data());
    ASSERT_EQ(q8, q8_want) << "q8_0 trial " << trial;
    ASSERT_EQ(s8, s8_want) << "q8_0 scales trial " << trial;
    std::vector<std::uint8_t> f8(static_cast<std::size_t>(dim)), f8_want(f8.size());
    float amax = 0.0f;
    for (float v : x) amax = std::fmax(amax, std::fabs(v));
    const cuda::KvScale sc = cuda::kv_scale_for(amax, kFp8E4M3Max);
    for (std::int64_t i = 0; i < dim; ++i) f8[i] = cuda::f32_to_fp8_e4m3(cuda::mul_rn(x[i], sc.inverse));
    std::uint16_t fs_want = 0;
    encode_kv_row(KvDType::kFp8E4M3, x.data(), dim, f8_want.data(), &fs_want);
    ASSERT_EQ(f8, f8_want) << "fp8 trial " << trial;
    ASSERT_EQ(sc.bits, fs_want) << "fp8 scale trial " << trial;
  }
}

TEST(CudaMath, SamplingArithmeticGivesSamplerMathsBits) {
  std::mt19937 rng(5);
  namespace cs = cuda::sampling;
  for (float x : awkward_floats(rng, 100000)) {
    const float e = -std::fabs(x);
    ASSERT_EQ(bits(cs::softmax_exp(e)), bits(sampler_math::softmax_exp(e))) << e;
    ASSERT_EQ(cs::logit_key(x), sampler_math::logit_key(x)) << x;
    ASSERT_EQ(cs::is_positive_finite(x), sampler_math::is_positive_finite(x)) << x;
  }
  std::uniform_real_distribution<float> depth(-100.0f, 0.0f);
  for (int i = 0; i < 200000; ++i) {
    const float e = depth(rng);
    ASSERT_EQ(bits(cs::softmax_exp(e)), bits(sampler_math::softmax_exp(e))) << e;
  }
  // The rank key orders as RowSampler ranks: by value as floats compare
  // (NaN as -inf), ties to the lower id.
  const float values[] = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::infinity(),
                          1e-30f};
  for (float a : values)
    for (float b : values)
      for (std::int64_t ia : {3, 7})
        for (std::int64_t ib : {3, 7}) {
          if (ia == ib) continue;
          const float ra = std::isnan(a) ? -INFINITY : a, rb = std::isnan(b) ? -INFINITY : b;
          const bool before = ra > rb || (ra == rb && ia < ib);
          EXPECT_EQ(cs::rank_key(a, ia) < cs::rank_key(b, ib), before) << a << "@" << ia << " vs " << b << "@" << ib;
        }
  for (std::uint64_t seed : {0ull, 1ull, 0xDEADBEEFull}) {
    SamplingRng host = SamplingRng::from_state(seed);
    cs::Rng device{seed};
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(device.uniform(), host.uniform());
  }
}

// The sampling kernel's definition (sampling.cu's draw()), as host loops:
// the kept set is a prefix of the rank order cut by top-k and top-p (masses
// added one by one in rank order) and filtered by min-p; the divisor and
// the total are lane sums in id order; the draw walks ids in order.
SampleResult kernel_definition(const std::vector<float>& P, const SamplingRowParams& p) {
  namespace cs = cuda::sampling;
  const auto V = static_cast<std::int64_t>(P.size());
  SampleResult res;
  float mx = -INFINITY;
  for (float l : P) mx = std::fmax(mx, l);
  std::vector<std::uint64_t> order(static_cast<std::size_t>(V));
  for (std::int64_t i = 0; i < V; ++i) order[i] = cs::rank_key(P[i], i);
  std::sort(order.begin(), order.end());
  auto weight = [&](std::int64_t i) { return cs::softmax_weight(P[i], mx, p.temperature); };
  auto lane_sum = [&](const std::vector<float>& v) {
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (std::int64_t i = 0; i < V; ++i)
      if (cs::is_positive_finite(v[i])) lanes[i % 8] += v[i];
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  };
  const bool top_k = p.top_k > 0 && p.top_k < V, top_p = p.top_p < 1.0f;
  std::int64_t count = V;
  if (top_k) count = p.top_k;
  if (top_p) {
    double target;
    if (top_k) {
      double total = 0;
      for (std::int64_t j = 0; j < count; ++j)
        total += cs::softmax_weight(cs::rank_value(P[cs::rank_id(order[j])]), mx, p.temperature);
      target = static_cast<double>(p.top_p) * total;
    } else {
      std::vector<float> all(static_cast<std::size_t>(V));
      for (std::int64_t i = 0; i < V; ++i) all[i] = weight(i);
      target = static_cast<double>(p.top_p) * lane_sum(all);
    }
    double mass = 0;
    std::int64_t j = 0;
    for (; j < count; ++j) {
      if (!(mass < target)) break;
      mass += cs::softmax_weight(cs::rank_value(P[cs::rank_id(order[j])]), mx, p.temperature);
    }
    count = j;
  }
  std::vector<float> dense(static_cast<std::size_t>(V), 0.0f);
  for (std::int64_t j = 0; j < count; ++j) {
    const std::int32_t id = cs::rank_id(order[j]);
    const float w = weight(id);
    if (w > 0.0f && w >= p.min_p) dense[id] = w;
  }
  const auto divisor = static_cast<float>(lane_sum(dense));
  for (float& d : dense) d /= divisor;
  cs::Rng rng{p.rng_state};
  if (p.draft_token >= 0) {
    if (rng.uniform() < static_cast<double>(dense[p.draft_token])) return {p.draft_token, 1};
    dense[p.draft_token] = 0.0f;
  }
  const double target = rng.uniform() * lane_sum(dense);
  double cum = 0;
  for (std::int64_t i = 0; i < V; ++i) {
    if (!cs::is_positive_finite(dense[i])) continue;
    cum += dense[i];
    res.token = static_cast<std::int32_t>(i);
    if (cum > target) break;
  }
  return res;
}

TEST(CudaMath, TheSamplingKernelsDefinitionGivesRowSamplersTokens) {
  std::mt19937 rng(6);
  RowSampler sampler;
  int rows = 0;
  for (std::int64_t vocab : {7, 1000, 49152}) {
    for (int r = 0; r < 120; ++r, ++rows) {
      std::vector<float> logits = random_floats(static_cast<std::size_t>(vocab), rng, 3.0f);
      logits[3] = std::numeric_limits<float>::quiet_NaN();
      logits[1] = logits[0];
      SamplingRowParams p;
      const int kind = r % 6;
      p.temperature = std::uniform_real_distribution<float>(0.2f, 1.6f)(rng);
      if (kind == 1) p.top_k = 1 + static_cast<int>(rng() % 40);
      if (kind == 2) p.top_k = 600 + static_cast<int>(rng() % 2000);
      if (kind == 2 || kind == 3) p.top_p = std::uniform_real_distribution<float>(0.05f, 0.99f)(rng);
      if (kind == 4) p.min_p = std::uniform_real_distribution<float>(0.01f, 0.3f)(rng);
      p.rng_state = (static_cast<std::uint64_t>(rng()) << 32) | rng();
      if (rng() % 3 == 0) p.draft_token = static_cast<std::int32_t>(rng() % vocab);
      SampleResult want;
      sampler.run(logits, p, {}, {}, want, nullptr);
      const SampleResult got = kernel_definition(logits, p);
      ASSERT_EQ(got.token, want.token) << "vocab " << vocab << " row " << r << " kind " << kind;
      ASSERT_EQ(got.accepted, want.accepted) << "vocab " << vocab << " row " << r;
    }
  }
  EXPECT_EQ(rows, 360);
}

// A head of host floats for rope_pair.
struct HostHead {
  float* v;
  float load(std::int64_t d) const { return v[d]; }
  void store(std::int64_t d, float x) const { v[d] = x; }
};

// The rope kernel's work items, every one of a batch run on the host, give
// the reference's bits: both pair orderings, partial rotary dimensions, a
// factor on cos/sin and a query temperature, whose unrotated dimensions the
// pairs' items cover between them.
TEST(CudaMath, RopeItemsGiveTheReferencesBits) {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (bool neox : {false, true}) {
    for (const auto& [dim, head_dim] : {std::pair{64, 64}, std::pair{24, 64}, std::pair{12, 16}}) {
      for (bool scaled : {false, true}) {
        const std::int64_t T = 9, heads = 3, half = dim / 2;
        std::vector<float> inv_freq;
        for (int i = 0; i < half; ++i) inv_freq.push_back(static_cast<float>(std::pow(10000.0, -2.0 * i / dim)));
        std::vector<std::int32_t> pos;
        for (std::int64_t t = 0; t < T; ++t) pos.push_back(static_cast<std::int32_t>(t * 61));
        std::vector<float> x(static_cast<std::size_t>(T * heads * head_dim));
        for (float& v : x) v = normal(rng);
        RopeTable table;
        table.neox = neox;
        table.dim = dim;
        table.inv_freq = Tensor(inv_freq.data(), DType::F32, {half});
        cuda::RopeTemperature temperature;
        if (scaled) {
          table.attention_factor = 1.19f;
          table.temperature_beta = temperature.beta = 0.1f;
          table.temperature_offset = temperature.offset = 1.0f;
          table.temperature_length = temperature.length = 100.0f;
        }
        std::vector<float> want = x, got = x;
        Tensor wt(want.data(), DType::F32, {T, heads, head_dim}), pt(pos.data(), DType::I32, {T});
        ReferenceBackend().rope(wt, pt, table);
        for (std::int64_t item = 0; item < T * heads * half; ++item) {
          const std::int64_t i = item % half, th = item / half, t = th / heads;
          HostHead head{got.data() + th * head_dim};
          cuda::rope_pair(head, static_cast<float>(pos[t]), inv_freq[i], i, dim, head_dim, neox,
                          table.attention_factor, temperature);
        }
        for (std::size_t k = 0; k < got.size(); ++k)
          ASSERT_EQ(bits(got[k]), bits(want[k])) << "neox " << neox << " dim " << dim << " scaled " << scaled
                                                 << " at " << k;
      }
    }
  }
}

// gpt-oss's clamped SwiGLU as the glu kernel computes it gives the
// reference's bits, inside and past both clamps.
TEST(CudaMath, ClampedSwigluGivesTheReferencesBits) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 6.0f);
  std::vector<float> gate = {-8.0f, -7.0f, 0.0f, 6.99f, 7.0f, 7.01f, 30.0f}, up = {-30.0f, -7.0f, 6.5f, 7.0f, 8.0f, 0.0f, -1.0f};
  while (gate.size() < 4096) {
    gate.push_back(normal(rng));
    up.push_back(normal(rng));
  }
  std::vector<float> want(gate.size());
  const auto n = static_cast<std::int64_t>(gate.size());
  Tensor g(gate.data(), DType::F32, {n}), u(up.data(), DType::F32, {n}), w(want.data(), DType::F32, {n});
  ReferenceBackend().glu(g, u, GluActivation::kSwigluClamped, w);
  for (std::size_t i = 0; i < gate.size(); ++i)
    ASSERT_EQ(bits(cuda::swiglu_clamped(gate[i], up[i])), bits(want[i])) << gate[i] << ", " << up[i];
}

// The attention kernel's online softmax (running max, running sum) with a
// sink folded in after the keys gives the sink's closed form: the weights
// e^(s - m) / (sum e^(s - m) + e^(sink - m)), within float rounding, for
// sinks among, far above and far below the scores.
TEST(CudaMath, FoldingASinkGivesTheClosedFormWeights) {
  std::mt19937 rng(24);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (float sink : {-40.0f, -1.0f, 0.0f, 0.7f, 3.0f, 25.0f}) {
    std::vector<float> scores(37);
    for (float& s : scores) s = normal(rng);
    float running_max = -INFINITY, running_sum = 0.0f, value = 0.0f;  // value: sum p_j * j
    for (std::size_t j = 0; j < scores.size(); ++j) {
      const float new_max = std::fmax(running_max, scores[j]);
      const float correction = std::exp(running_max - new_max), p = std::exp(scores[j] - new_max);
      running_sum = std::fma(running_sum, correction, p);
      value = std::fma(value, correction, p * static_cast<float>(j));
      running_max = new_max;
    }
    value *= cuda::fold_sink(sink, running_max, running_sum);
    double m = sink, denominator = 0.0, numerator = 0.0;
    for (float s : scores) m = std::max<double>(m, s);
    for (std::size_t j = 0; j < scores.size(); ++j) {
      denominator += std::exp(scores[j] - m);
      numerator += std::exp(scores[j] - m) * static_cast<double>(j);
    }
    denominator += std::exp(sink - m);
    EXPECT_NEAR(value / running_sum, numerator / denominator, 1e-5 * (1.0 + numerator / denominator)) << sink;
    EXPECT_EQ(running_max, static_cast<float>(m)) << sink;
  }
}

}  // namespace
}  // namespace folio::testing

#endif  // FOLIO_CUDA
