// The mixture-of-experts ops of every backend against the f32 reference:
// routing (top-k of the softmax, normalised or not), grouping by expert,
// expert_matmul for several weight types, without and with a bias per expert
// (and, row by row, the bits of the backend's own matmul of that expert),
// combining in rank order, the shared expert's sigmoid gate; DeepSeek's
// grouped router against the reference and against the rule written out
// again here; concat_cols; and bad input refused.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "backend/reference/reference_backend.h"
#include "core/error.h"
#include "support/op_suite.h"
#include "tensor/quantize.h"

namespace folio::testing {
namespace {

class MoeOps : public OpTest {};

struct MoeCase {
  std::int64_t tokens, experts, k;
  DType type;
  std::int64_t out, in;
};

TEST_P(MoeOps, RouteGroupMatmulCombineAgainstReference) {
  const MoeCase cases[] = {
      {1, 4, 2, DType::F32, 16, 32},   {5, 8, 2, DType::F16, 24, 64},  {13, 8, 3, DType::Q8_0, 40, 96},
      {9, 16, 4, DType::Q4_0, 33, 64}, {7, 4, 4, DType::Q4_K, 8, 256}, {3, 64, 8, DType::BF16, 17, 32},
      // MXFP4 is the experts' type of gpt-oss; the other grid types too.
      {9, 16, 4, DType::MXFP4, 33, 64}, {5, 8, 2, DType::NVFP4, 24, 128}, {7, 4, 4, DType::IQ4_XS, 8, 256},
      {3, 8, 2, DType::IQ4_NL, 17, 96},
  };
  const BackendUnderTest& u = GetParam();
  std::mt19937 rng(11);
  ReferenceBackend ref;
  for (const MoeCase& c : cases) {
    SCOPED_TRACE(fmt::format("{} tokens, {} experts, top {}, {} [{}, {}]", c.tokens, c.experts, c.k, name(c.type),
                             c.out, c.in));
    const std::int64_t T = c.tokens, E = c.experts, k = c.k, N = T * k;

    // Routing: the same ids and weights, normalised or not.
    auto logits = rounded_to(act(), random_floats(static_cast<std::size_t>(T * E), rng, 2.0f));
    DeviceTensor logits_d(be(), act(), {T, E});
    logits_d.upload_floats(logits);
    Tensor logits_h(logits.data(), DType::F32, {T, E});
    std::vector<std::int32_t> ids(N);
    std::vector<float> weights(N);
    Tensor ids_h(ids.data(), DType::I32, {T, k}), weights_h(weights.data(), DType::F32, {T, k});
    DeviceTensor ids_d(be(), DType::I32, {T, k}), weights_d(be(), DType::F32, {T, k});
    for (bool normalize : {false, true}) {
      ref.moe_route(logits_h, normalize, ids_h, weights_h);
      be().moe_route(*logits_d, normalize, *ids_d, *weights_d);
      ASSERT_EQ(ids_d.download_values<std::int32_t>(), ids) << "normalize " << normalize;
      // Probabilities are at most 1: float_ops is their bound where exp is not the host's.
      const std::vector<double> unit(weights.size(), 1.0);
      ASSERT_EQ(compare(weights_d.download_floats(), weights, unit, u.exact_elementwise ? 0.0 : u.float_ops, 0,
                        "routing weights"),
                "");
    }
    for (std::int64_t t = 0; t < T; ++t) {
      std::vector<float> sorted(logits.begin() + t * E, logits.begin() + (t + 1) * E);
      std::sort(sorted.rbegin(), sorted.rend());
      for (std::int64_t r = 0; r < k; ++r) EXPECT_EQ(logits[t * E + ids[t * k + r]], sorted[r]) << "the k largest";
    }

    // Grouping: the same, and a permutation consistent with ids.
    std::vector<std::int32_t> offsets(E + 1), tokens(N), rows(N);
    Tensor off_h(offsets.data(), DType::I32, {E + 1}), tok_h(tokens.data(), DType::I32, {N}),
        rows_h(rows.data(), DType::I32, {T, k});
    ref.moe_group(ids_h, off_h, tok_h, rows_h);
    DeviceTensor off_d(be(), DType::I32, {E + 1}), tok_d(be(), DType::I32, {N}), rows_d(be(), DType::I32, {T, k});
    be().moe_group(*ids_d, *off_d, *tok_d, *rows_d);
    ASSERT_EQ(off_d.download_values<std::int32_t>(), offsets);
    ASSERT_EQ(tok_d.download_values<std::int32_t>(), tokens);
    ASSERT_EQ(rows_d.download_values<std::int32_t>(), rows);
    ASSERT_EQ(offsets[E], N);
    for (std::int64_t a = 0; a < N; ++a) {
      const std::int32_t row = rows[a], e = ids[a];
      EXPECT_TRUE(row >= offsets[e] && row < offsets[e + 1]) << "assignment " << a << " outside its expert's rows";
      EXPECT_EQ(tokens[row], a / k);
    }

    // expert_matmul over a stacked [E, out, in] weight.
    const std::int64_t per_expert = row_bytes(c.type, c.in) * c.out;
    HostBytes w_bytes(static_cast<std::size_t>(E * per_expert), 1);
    for (std::int64_t r = 0; r < E * c.out; ++r) {
      auto vals = random_floats(static_cast<std::size_t>(c.in), rng, 0.5f);
      quantize_row(c.type, vals.data(), w_bytes.data() + r * row_bytes(c.type, c.in), c.in);
    }
    const Tensor w_h(w_bytes.data(), c.type, {E, c.out, c.in});
    DeviceWeight w(be(), w_h);
    auto x = rounded_to(act(), random_floats(static_cast<std::size_t>(N * c.in), rng));
    DeviceTensor x_d(be(), act(), {N, c.in}), y_d(be(), act(), {N, c.out}, 4);
    x_d.upload_floats(x);
    std::vector<float> y(static_cast<std::size_t>(N * c.out));
    Tensor x_h(x.data(), DType::F32, {N, c.in}), y_h(y.data(), DType::F32, {N, c.out});
    ref.expert_matmul(w_h, x_h, off_h, y_h, nullptr);
    be().expert_matmul(w.tensor, *x_d, *off_d, *y_d, nullptr);
    // The bound of each output: float reassociation over sum |w x|, and for
    // 8-bit activations what their rounding explains (as in matmul_ops_test).
    std::vector<double> scale(y.size(), 0.0);
    std::vector<float> wrow(static_cast<std::size_t>(c.in));
    const std::int64_t block = act_block_elems(c.type);
    const bool q8 = u.q8_activations && !is_float(c.type);
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t j = offsets[e]; j < offsets[e + 1]; ++j)
        for (std::int64_t o = 0; o < c.out; ++o) {
          dequantize_row(c.type, expert_weight(w_h, e).row(o), wrow.data(), c.in);
          double abs_sum = 1e-3, act_err = 0;
          for (std::int64_t b0 = 0; b0 < c.in; b0 += block) {
            float amax = 0.0f;
            for (std::int64_t i = b0; i < std::min(c.in, b0 + block); ++i) amax = std::max(amax, std::fabs(x[j * c.in + i]));
            for (std::int64_t i = b0; i < std::min(c.in, b0 + block); ++i) {
              abs_sum += std::fabs(wrow[i] * x[j * c.in + i]);
              act_err += std::fabs(wrow[i]) * (amax / 127.0 * 0.5001);
            }
          }
          scale[j * c.out + o] = u.float_ops * abs_sum +
                                 (q8 ? act_err + 4.0 * (double(c.in) / 32 + 16) * 0x1p-24 * abs_sum : 0.0);
        }
    const std::vector<float> y_got = y_d.download_floats();
    ASSERT_EQ(compare(y_got, y, scale, 1.0, u.rounding, "expert_matmul"), "");
    y_d.expect_guards_intact("expert_matmul");
    // A row alone through the backend's matmul of its expert: the same bits.
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t j = offsets[e]; j < offsets[e + 1]; ++j) {
        DeviceTensor one(be(), act(), {1, c.in}), alone(be(), act(), {1, c.out});
        one.upload_floats(std::vector<float>(x.begin() + j * c.in, x.begin() + (j + 1) * c.in));
        be().matmul(expert_weight(w.tensor, e), *one, *alone, nullptr);
        const std::vector<float> a = alone.download_floats();
        ASSERT_TRUE(std::equal(a.begin(), a.end(), y_got.begin() + j * c.out)) << "expert " << e << " row " << j;
      }

    // A bias per expert (gpt-oss's experts): against the reference, and a row
    // alone through matmul with its expert's bias row, the same bits.
    const std::vector<float> bias = random_floats(static_cast<std::size_t>(E * c.out), rng, 1.0f);
    DeviceTensor bias_d(be(), DType::F32, {E, c.out}), yb_d(be(), act(), {N, c.out}, 4);
    bias_d.upload_values(bias);
    std::vector<float> yb(y.size());
    Tensor bias_h(const_cast<float*>(bias.data()), DType::F32, {E, c.out}), yb_h(yb.data(), DType::F32, {N, c.out});
    ref.expert_matmul(w_h, x_h, off_h, yb_h, &bias_h);
    be().expert_matmul(w.tensor, *x_d, *off_d, *yb_d, &*bias_d);
    std::vector<double> bias_scale = scale;
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t j = offsets[e]; j < offsets[e + 1]; ++j)
        for (std::int64_t o = 0; o < c.out; ++o)
          bias_scale[j * c.out + o] += u.float_ops * (std::fabs(bias[e * c.out + o]) + std::fabs(yb[j * c.out + o]));
    const std::vector<float> yb_got = yb_d.download_floats();
    ASSERT_EQ(compare(yb_got, yb, bias_scale, 1.0, u.rounding, "expert_matmul with bias"), "");
    yb_d.expect_guards_intact("expert_matmul with bias");
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t j = offsets[e]; j < offsets[e + 1]; ++j) {
        DeviceTensor one(be(), act(), {1, c.in}), alone(be(), act(), {1, c.out});
        one.upload_floats(std::vector<float>(x.begin() + j * c.in, x.begin() + (j + 1) * c.in));
        const Tensor bias_row = expert_bias(*bias_d, e);
        be().matmul(expert_weight(w.tensor, e), *one, *alone, &bias_row);
        const std::vector<float> a = alone.download_floats();
        ASSERT_TRUE(std::equal(a.begin(), a.end(), yb_got.begin() + j * c.out)) << "biased expert " << e << " row " << j;
      }

    // Combining in rank order, and the shared expert's gate.
    const std::vector<float> ys = y_got;
    DeviceTensor out_d(be(), act(), {T, c.out});
    std::vector<float> out(static_cast<std::size_t>(T * c.out));
    Tensor ys_h(const_cast<float*>(ys.data()), DType::F32, {N, c.out}), out_h(out.data(), DType::F32, {T, c.out});
    ref.moe_combine(ys_h, rows_h, weights_h, out_h);
    be().moe_combine(*y_d, *rows_d, *weights_d, *out_d);
    const std::vector<float> combined = out_d.download_floats();
    ASSERT_EQ(compare(combined, out, {}, 0, u.rounding, "moe_combine"), "");
    auto gate = rounded_to(act(), random_floats(static_cast<std::size_t>(T), rng, 2.0f));
    DeviceTensor gate_d(be(), act(), {T, 1});
    gate_d.upload_floats(gate);
    std::vector<float> gated = rounded_to(act(), combined);
    Tensor gated_h(gated.data(), DType::F32, {T, c.out}), comb_h(const_cast<float*>(combined.data()), DType::F32, {T, c.out}),
        gate_h(gate.data(), DType::F32, {T, 1});
    ref.add_sigmoid_gated(gated_h, comb_h, gate_h);
    be().add_sigmoid_gated(*out_d, *out_d, *gate_d);
    std::vector<double> gate_scale;
    for (float g : gated) gate_scale.push_back(1.0 + std::fabs(g));
    ASSERT_EQ(compare(out_d.download_floats(), gated, gate_scale, u.exact_elementwise ? 0.0 : u.float_ops, u.rounding,
                      "add_sigmoid_gated"),
              "");
  }
}

// DeepSeek's router written out once more, by sorting: the groups by their
// score, then the experts of the kept groups (distinct random logits: no ties).
struct GroupedChoice {
  std::vector<std::int32_t> ids;
  std::vector<double> weights;
};
GroupedChoice grouped_by_sorting(const float* logits, const float* bias, std::int64_t E, std::int64_t k,
                                 const GroupedRouting& r) {
  std::vector<double> s(E), choice(E);
  double sum = 0;
  for (std::int64_t e = 0; e < E; ++e) sum += std::exp(static_cast<double>(logits[e]));
  for (std::int64_t e = 0; e < E; ++e) {
    s[e] = r.sigmoid ? 1.0 / (1.0 + std::exp(-static_cast<double>(logits[e]))) : std::exp(logits[e]) / sum;
    choice[e] = s[e] + (bias != nullptr ? bias[e] : 0.0);
  }
  const std::int64_t per = E / r.num_groups;
  std::vector<std::pair<double, std::int64_t>> groups;
  for (std::int64_t g = 0; g < r.num_groups; ++g) {
    std::vector<double> members(choice.begin() + g * per, choice.begin() + (g + 1) * per);
    std::sort(members.rbegin(), members.rend());
    groups.push_back({r.group_top2 ? members[0] + members[1] : members[0], g});
  }
  std::sort(groups.begin(), groups.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<std::pair<double, std::int32_t>> candidates;
  for (std::int64_t i = 0; i < r.groups_used; ++i)
    for (std::int64_t e = groups[i].second * per; e < (groups[i].second + 1) * per; ++e)
      candidates.push_back({choice[e], static_cast<std::int32_t>(e)});
  std::sort(candidates.begin(), candidates.end(), [](auto& a, auto& b) { return a.first > b.first; });
  GroupedChoice out;
  double chosen = 0;
  for (std::int64_t i = 0; i < k; ++i) {
    out.ids.push_back(candidates[i].second);
    out.weights.push_back(s[candidates[i].second]);
    chosen += s[candidates[i].second];
  }
  for (double& w : out.weights) w = (r.normalize ? w / chosen : w) * r.scale;
  return out;
}

TEST_P(MoeOps, GroupedRouteAgainstReferenceAndTheRule) {
  struct Case {
    std::int64_t tokens, experts, k;
    GroupedRouting routing;
    bool bias;
  };
  const Case cases[] = {
      // V3: sigmoid, correction bias, groups by their top two, renormalised, scaled.
      {9, 8, 2, {.sigmoid = true, .num_groups = 4, .groups_used = 2, .group_top2 = true, .normalize = true, .scale = 2.5f}, true},
      {5, 64, 8, {.sigmoid = true, .num_groups = 8, .groups_used = 4, .group_top2 = true, .normalize = true, .scale = 2.5f}, true},
      // V2: softmax, groups by their best, as they are, scaled.
      {7, 8, 2, {.sigmoid = false, .num_groups = 4, .groups_used = 2, .group_top2 = false, .normalize = false, .scale = 1.5f}, false},
      {3, 16, 3, {.sigmoid = false, .num_groups = 4, .groups_used = 1, .group_top2 = false, .normalize = false, .scale = 1.0f}, false},
      // One group: plain top-k of the sigmoid scores with the bias (GLM-4.5's kind).
      {4, 8, 3, {.sigmoid = true, .num_groups = 1, .groups_used = 1, .group_top2 = true, .normalize = true, .scale = 1.0f}, true},
  };
  const BackendUnderTest& u = GetParam();
  std::mt19937 rng(23);
  ReferenceBackend ref;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} tokens, {} experts in {} groups, {} kept, top {}", c.tokens, c.experts,
                             c.routing.num_groups, c.routing.groups_used, c.k));
    const std::int64_t T = c.tokens, E = c.experts, k = c.k;
    auto logits = rounded_to(act(), random_floats(static_cast<std::size_t>(T * E), rng, 2.0f));
    auto bias = random_floats(static_cast<std::size_t>(E), rng, 0.3f);
    DeviceTensor logits_d(be(), act(), {T, E}), bias_d(be(), DType::F32, {E});
    logits_d.upload_floats(logits);
    bias_d.upload_floats(bias);
    Tensor logits_h(logits.data(), DType::F32, {T, E}), bias_h(bias.data(), DType::F32, {E});
    std::vector<std::int32_t> ids(T * k);
    std::vector<float> weights(T * k);
    Tensor ids_h(ids.data(), DType::I32, {T, k}), weights_h(weights.data(), DType::F32, {T, k});
    DeviceTensor ids_d(be(), DType::I32, {T, k}), weights_d(be(), DType::F32, {T, k});
    ref.moe_route_grouped(logits_h, c.bias ? &bias_h : nullptr, c.routing, ids_h, weights_h);
    be().moe_route_grouped(*logits_d, c.bias ? &*bias_d : nullptr, c.routing, *ids_d, *weights_d);
    ASSERT_EQ(ids_d.download_values<std::int32_t>(), ids);
    const std::vector<double> unit(weights.size(), c.routing.scale);
    ASSERT_EQ(compare(weights_d.download_floats(), weights, unit, u.exact_elementwise ? 0.0 : u.float_ops, 0,
                      "grouped routing weights"),
              "");
    for (std::int64_t t = 0; t < T; ++t) {
      const GroupedChoice want =
          grouped_by_sorting(logits.data() + t * E, c.bias ? bias.data() : nullptr, E, k, c.routing);
      for (std::int64_t r = 0; r < k; ++r) {
        EXPECT_EQ(ids[t * k + r], want.ids[r]) << "token " << t << " rank " << r;
        EXPECT_NEAR(weights[t * k + r], want.weights[r], 1e-5 * c.routing.scale) << "token " << t << " rank " << r;
      }
    }
  }
}

TEST_P(MoeOps, ConcatColsMovesBitsAsTheyAre) {
  std::mt19937 rng(29);
  for (auto [rows, a_cols, b_cols] : {std::array<std::int64_t, 3>{1, 8, 32}, {13, 64, 512}, {5, 3, 5}}) {
    auto a = rounded_to(act(), random_floats(static_cast<std::size_t>(rows * a_cols), rng, 3.0f));
    auto b = rounded_to(act(), random_floats(static_cast<std::size_t>(rows * b_cols), rng, 3.0f));
    DeviceTensor a_d(be(), act(), {rows, a_cols}), b_d(be(), act(), {rows, b_cols}),
        out_d(be(), act(), {rows, a_cols + b_cols});
    a_d.upload_floats(a);
    b_d.upload_floats(b);
    be().concat_cols(*a_d, *b_d, *out_d);
    std::vector<float> want;
    for (std::int64_t r = 0; r < rows; ++r) {
      want.insert(want.end(), a.begin() + r * a_cols, a.begin() + (r + 1) * a_cols);
      want.insert(want.end(), b.begin() + r * b_cols, b.begin() + (r + 1) * b_cols);
    }
    EXPECT_EQ(out_d.download_floats(), want);
  }
  DeviceTensor a(be(), act(), {2, 3}), b(be(), act(), {2, 4}), wrong(be(), act(), {2, 8});
  EXPECT_THROW(be().concat_cols(*a, *b, *wrong), Error);
}

TEST_P(MoeOps, BadInputIsRefused) {
  DeviceTensor ids(be(), DType::I32, {1, 2}), off(be(), DType::I32, {5}), tok(be(), DType::I32, {2}),
      rows(be(), DType::I32, {1, 2});
  ids.upload_values(std::vector<std::int32_t>{0, 5});  // expert 5 of 4
  // Device data is checked by the kernels; a device backend throws at the next sync.
  EXPECT_THROW(
      {
        be().moe_group(*ids, *off, *tok, *rows);
        be().synchronize();
      },
      Error);
  DeviceTensor logits(be(), act(), {1, 3}), four(be(), DType::I32, {1, 4}), w(be(), DType::F32, {1, 4});
  EXPECT_THROW(be().moe_route(*logits, true, *four, *w), Error);  // top-4 of 3 experts
  {
    DeviceTensor eight(be(), act(), {1, 8}), two(be(), DType::I32, {1, 2}), w2(be(), DType::F32, {1, 2});
    GroupedRouting three_groups{.num_groups = 3};
    EXPECT_THROW(be().moe_route_grouped(*eight, nullptr, three_groups, *two, *w2), Error);  // 8 experts in 3 groups
    DeviceTensor three(be(), DType::I32, {1, 3}), w3(be(), DType::F32, {1, 3});
    GroupedRouting one_of_four{.num_groups = 4, .groups_used = 1};
    EXPECT_THROW(be().moe_route_grouped(*eight, nullptr, one_of_four, *three, *w3), Error);  // top-3 of 2 kept
  }
  std::vector<std::uint8_t> wm(static_cast<std::size_t>(2 * 4 * 4 * 4));
  DeviceWeight weight(be(), Tensor(wm.data(), DType::F32, {2, 4, 4}));
  DeviceTensor x(be(), act(), {2, 4}), y(be(), act(), {2, 4}), bad(be(), DType::I32, {3});
  bad.upload_values(std::vector<std::int32_t>{0, 2, 1});  // decreasing offsets
  EXPECT_THROW(
      {
        be().expert_matmul(weight.tensor, *x, *bad, *y, nullptr);
        be().synchronize();
      },
      Error);
}

// A bias of the wrong shape or type is refused before anything runs.
TEST_P(MoeOps, ExpertBiasOfTheWrongShapeIsRefused) {
  std::vector<std::uint8_t> wm(static_cast<std::size_t>(2 * 4 * 4 * 4));
  DeviceWeight weight(be(), Tensor(wm.data(), DType::F32, {2, 4, 4}));
  DeviceTensor x(be(), act(), {2, 4}), y(be(), act(), {2, 4}), off(be(), DType::I32, {3});
  off.upload_values(std::vector<std::int32_t>{0, 1, 2});
  DeviceTensor short_bias(be(), DType::F32, {4}), i32_bias(be(), DType::I32, {2, 4});
  EXPECT_THROW(be().expert_matmul(weight.tensor, *x, *off, *y, &*short_bias), Error);
  EXPECT_THROW(be().expert_matmul(weight.tensor, *x, *off, *y, &*i32_bias), Error);
}

FOLIO_OP_SUITE(MoeOps);

}  // namespace
}  // namespace folio::testing
