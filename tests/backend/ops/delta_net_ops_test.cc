// Linear attention's ops (causal_conv1d, gated_delta_rule) of every backend
// against the f32 reference, over a step that mixes a fresh prefill, a
// continued prefill, a fresh and a continued decode and a padding sequence,
// each on its own state slot: outputs and the slots left behind, with an
// untouched slot's bits checked too. The reference itself is held to the
// definitions: the convolution written out, and the delta rule's first
// token from a zero state in closed form.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>

#include "backend/reference/reference_backend.h"
#include "support/op_suite.h"

namespace folio::testing {
namespace {

constexpr std::int64_t kKeyHeads = 2, kKeyDim = 16, kValueHeads = 4, kValueDim = 8, kKernel = 4, kSlots = 5;
constexpr std::int64_t kChannels = 2 * kKeyHeads * kKeyDim + kValueHeads * kValueDim;

class DeltaNetOps : public OpTest {};

std::vector<double> unit_scale(const std::vector<float>& want) {
  std::vector<double> s;
  for (float w : want) s.push_back(1.0 + std::fabs(w));
  return s;
}

// (context, new tokens) per sequence and its slot: a fresh prefill, a
// continued one, a fresh decode, a continued decode, and padding (slot -1).
const std::vector<std::pair<int, int>> kSeqs = {{5, 5}, {9, 3}, {1, 1}, {20, 1}, {1, 1}};
const std::vector<std::int32_t> kSlotOf = {2, 0, 3, 1, -1};  // slot 4 is nobody's

TEST_P(DeltaNetOps, ConvolutionAndDeltaRuleAgainstReference) {
  if (!be().has_linear_attention()) GTEST_SKIP() << be().name() << " has no linear-attention kernels yet";
  const BackendUnderTest& u = GetParam();
  std::mt19937 rng(42);
  ReferenceBackend ref;
  const auto blocks = shuffled_blocks(static_cast<int>(kSeqs.size()), 2, rng);
  DeviceBatch batch(be(), kSeqs, blocks, 16);
  DeviceTensor slots(be(), DType::I32, {static_cast<std::int64_t>(kSlotOf.size())});
  slots.upload_values(kSlotOf);
  const std::int64_t T = batch.meta.num_tokens;
  // The host's copy of the metadata, for the reference.
  AttentionMetadata host_meta = batch.meta;
  host_meta.positions = Tensor(batch.positions.data(), DType::I32, {T});
  host_meta.query_start = Tensor(batch.query_start.data(), DType::I32, {static_cast<std::int64_t>(kSeqs.size()) + 1});
  std::vector<std::int32_t> slot_values = kSlotOf;
  Tensor host_slots(slot_values.data(), DType::I32, {static_cast<std::int64_t>(kSlotOf.size())});

  for (bool tiled : {false, true}) {
    const std::string what = tiled ? "tiled heads" : "grouped heads";
    // Slots start with garbage: fresh sequences must not read it.
    std::vector<float> window = random_floats(static_cast<std::size_t>(kSlots * (kKernel - 1) * kChannels), rng);
    std::vector<float> matrix =
        random_floats(static_cast<std::size_t>(kSlots * kValueHeads * kKeyDim * kValueDim), rng);
    RecurrentState host_state{Tensor(window.data(), DType::F32, {kSlots, kKernel - 1, kChannels}),
                              Tensor(matrix.data(), DType::F32, {kSlots, kValueHeads, kKeyDim, kValueDim})};
    DeviceTensor window_d(be(), DType::F32, {kSlots, kKernel - 1, kChannels}, 4);
    DeviceTensor matrix_d(be(), DType::F32, {kSlots, kValueHeads, kKeyDim, kValueDim}, 4);
    window_d.upload_values(window);
    matrix_d.upload_values(matrix);
    RecurrentState state{*window_d, *matrix_d};

    auto x = rounded_to(act(), random_floats(static_cast<std::size_t>(T * kChannels), rng, 2.0f));
    auto w = random_floats(static_cast<std::size_t>(kChannels * kKernel), rng, 0.5f);
    Tensor xh(x.data(), DType::F32, {T, kChannels}), wh(w.data(), DType::F32, {kChannels, kKernel});
    DeviceTensor xd(be(), act(), {T, kChannels}, 4), conv_d(be(), act(), {T, kChannels}, 4);
    xd.upload_floats(x);
    DeviceWeight wd(be(), wh);
    std::vector<float> conv_want(static_cast<std::size_t>(T * kChannels));
    Tensor conv_h(conv_want.data(), DType::F32, {T, kChannels});
    ref.causal_conv1d(xh, wh, host_meta, host_slots, host_state, conv_h);
    be().causal_conv1d(*xd, wd.tensor, batch.meta, *slots, state, *conv_d);
    ASSERT_EQ(compare(conv_d.download_floats(), conv_want, unit_scale(conv_want), u.float_ops, u.rounding,
                      "causal_conv1d " + what),
              "");
    conv_d.expect_guards_intact("causal_conv1d");

    auto qkv = rounded_to(act(), conv_want);
    auto a = rounded_to(act(), random_floats(static_cast<std::size_t>(T * kValueHeads), rng));
    auto b = rounded_to(act(), random_floats(static_cast<std::size_t>(T * kValueHeads), rng));
    std::vector<float> decay = {-0.5f, -2.0f, -0.1f, -4.0f}, dt_bias = {0.3f, -0.7f, 1.1f, 0.0f};
    Tensor qkv_h(qkv.data(), DType::F32, {T, kChannels}), ah(a.data(), DType::F32, {T, kValueHeads}),
        bh(b.data(), DType::F32, {T, kValueHeads});
    DeviceTensor qkv_d(be(), act(), {T, kChannels}), a_d(be(), act(), {T, kValueHeads}),
        b_d(be(), act(), {T, kValueHeads}), decay_d(be(), DType::F32, {kValueHeads}),
        dt_d(be(), DType::F32, {kValueHeads}), out_d(be(), act(), {T, kValueHeads * kValueDim}, 4);
    qkv_d.upload_floats(qkv);
    a_d.upload_floats(a);
    b_d.upload_floats(b);
    decay_d.upload_values(decay);
    dt_d.upload_values(dt_bias);
    DeltaRuleParams host_p{kKeyHeads, tiled, Tensor(decay.data(), DType::F32, {kValueHeads}),
                           Tensor(dt_bias.data(), DType::F32, {kValueHeads})};
    DeltaRuleParams p{kKeyHeads, tiled, *decay_d, *dt_d};
    std::vector<float> out_want(static_cast<std::size_t>(T * kValueHeads * kValueDim));
    Tensor out_h(out_want.data(), DType::F32, {T, kValueHeads * kValueDim});
    ref.gated_delta_rule(qkv_h, ah, bh, host_p, host_meta, host_slots, host_state, out_h);
    be().gated_delta_rule(*qkv_d, *a_d, *b_d, p, batch.meta, *slots, state, *out_d);
    ASSERT_EQ(compare(out_d.download_floats(), out_want, unit_scale(out_want), u.float_ops, u.rounding,
                      "gated_delta_rule " + what),
              "");
    out_d.expect_guards_intact("gated_delta_rule");
    // The slots left behind: windows are inputs (exact), matrices f32 sums;
    // slot 4 and the padding sequence's nothing are untouched.
    ASSERT_EQ(compare(window_d.download_values<float>(), window, unit_scale(window), 0.0, u.rounding,
                      "convolution windows " + what),
              "");
    ASSERT_EQ(compare(matrix_d.download_values<float>(), matrix, unit_scale(matrix), u.float_ops, 0.0,
                      "delta rule states " + what),
              "");
    window_d.expect_guards_intact("convolution windows");
    matrix_d.expect_guards_intact("delta rule states");
  }
}

// The reference against the definitions on a fresh sequence of three
// tokens: the convolution written out (inputs before the first are zeros);
// the delta rule's first token from a zero state is beta * v * (k . q) with
// k, q unit vectors and q / sqrt(key_dim), whatever the decay.
TEST(DeltaNetReference, MatchesTheDefinitions) {
  std::mt19937 rng(7);
  ReferenceBackend ref;
  const std::int64_t T = 3, C = kChannels;
  std::vector<std::int32_t> positions = {0, 1, 2}, query_start = {0, 3}, slot_of = {0};
  AttentionMetadata meta;
  meta.num_tokens = T;
  meta.num_seqs = 1;
  meta.positions = Tensor(positions.data(), DType::I32, {T});
  meta.query_start = Tensor(query_start.data(), DType::I32, {2});
  Tensor slots(slot_of.data(), DType::I32, {1});
  std::vector<float> window(static_cast<std::size_t>((kKernel - 1) * C), 9.0f);  // stale: never read
  std::vector<float> matrix(static_cast<std::size_t>(kValueHeads * kKeyDim * kValueDim), 9.0f);
  RecurrentState state{Tensor(window.data(), DType::F32, {1, kKernel - 1, C}),
                       Tensor(matrix.data(), DType::F32, {1, kValueHeads, kKeyDim, kValueDim})};
  auto x = random_floats(static_cast<std::size_t>(T * C), rng);
  auto w = random_floats(static_cast<std::size_t>(C * kKernel), rng);
  std::vector<float> out(static_cast<std::size_t>(T * C));
  Tensor xh(x.data(), DType::F32, {T, C}), wh(w.data(), DType::F32, {C, kKernel}), oh(out.data(), DType::F32, {T, C});
  ref.causal_conv1d(xh, wh, meta, slots, state, oh);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t c = 0; c < C; ++c) {
      double sum = 0;
      for (std::int64_t j = 0; j < kKernel; ++j) {
        const std::int64_t src = t - (kKernel - 1) + j;
        if (src >= 0) sum += static_cast<double>(w[c * kKernel + j]) * x[src * C + c];
      }
      const double want = sum / (1.0 + std::exp(-sum));
      EXPECT_NEAR(out[t * C + c], want, 1e-5 * (1.0 + std::fabs(want))) << "conv at " << t << ", " << c;
    }
  // The window holds the last kernel - 1 = 3 inputs: all three tokens.
  for (std::int64_t i = 0; i < (kKernel - 1) * C; ++i) EXPECT_EQ(window[i], x[i]) << i;

  std::vector<float> a = random_floats(static_cast<std::size_t>(T * kValueHeads), rng);
  std::vector<float> b = random_floats(static_cast<std::size_t>(T * kValueHeads), rng);
  std::vector<float> decay = {-1.0f, -1.0f, -1.0f, -1.0f}, dt_bias = {0, 0, 0, 0};
  std::vector<float> core(static_cast<std::size_t>(T * kValueHeads * kValueDim));
  Tensor ah(a.data(), DType::F32, {T, kValueHeads}), bh(b.data(), DType::F32, {T, kValueHeads}),
      ch(core.data(), DType::F32, {T, kValueHeads * kValueDim});
  const DeltaRuleParams p{kKeyHeads, false, Tensor(decay.data(), DType::F32, {kValueHeads}),
                          Tensor(dt_bias.data(), DType::F32, {kValueHeads})};
  ref.gated_delta_rule(xh, ah, bh, p, meta, slots, state, ch);
  auto unit = [](const float* v) {
    double s = 0;
    for (std::int64_t i = 0; i < kKeyDim; ++i) s += static_cast<double>(v[i]) * v[i];
    return 1.0 / std::sqrt(s + 1e-6);
  };
  for (std::int64_t h = 0; h < kValueHeads; ++h) {
    const std::int64_t kh = h / (kValueHeads / kKeyHeads);
    const float* q = x.data() + kh * kKeyDim;
    const float* k = x.data() + kKeyHeads * kKeyDim + kh * kKeyDim;
    const float* v = x.data() + 2 * kKeyHeads * kKeyDim + h * kValueDim;
    double dot = 0;
    for (std::int64_t i = 0; i < kKeyDim; ++i) dot += static_cast<double>(q[i]) * k[i];
    dot *= unit(q) * unit(k) / std::sqrt(static_cast<double>(kKeyDim));
    const double beta = 1.0 / (1.0 + std::exp(-static_cast<double>(b[h])));
    for (std::int64_t j = 0; j < kValueDim; ++j) {
      const double want = beta * v[j] * dot;
      EXPECT_NEAR(core[h * kValueDim + j], want, 1e-5 * (1.0 + std::fabs(want))) << "head " << h << ", " << j;
    }
  }
}

FOLIO_OP_SUITE(DeltaNetOps);

}  // namespace
}  // namespace folio::testing
