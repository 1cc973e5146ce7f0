// The row-wise ops of every backend against the f32 reference, over awkward
// sizes and misaligned rows: rms_norm (in place too), rope in both pair
// orderings with a partial rotary dimension (plain and scaled), the gated
// activations (the sigmoid gate too), add, scale, scale_logits and gather_rows.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>

#include "backend/reference/reference_backend.h"
#include "support/op_suite.h"

namespace folio::testing {
namespace {

class RowOps : public OpTest {
 protected:
  // |want| + 1: the scale of a float op's error on values of order one.
  static std::vector<double> unit_scale(const std::vector<float>& want) {
    std::vector<double> s;
    for (float w : want) s.push_back(1.0 + std::fabs(w));
    return s;
  }
};

TEST_P(RowOps, RmsNormGluAddAndScaleAgainstReference) {
  std::mt19937 rng(9);
  const BackendUnderTest& u = GetParam();
  const double elementwise = u.exact_elementwise ? 0.0 : u.float_ops;
  ReferenceBackend ref;
  for (std::int64_t cols : {1, 7, 8, 9, 64, 576, 897}) {
    for (std::int64_t rows : {1, 3, 17}) {
      const std::string what = fmt::format("[{}, {}]", rows, cols);
      const auto n = static_cast<std::size_t>(rows * cols);
      auto x = rounded_to(act(), random_floats(n, rng, 3.0f));
      auto y = rounded_to(act(), random_floats(n, rng, 3.0f));
      auto w = random_floats(static_cast<std::size_t>(cols), rng);
      Tensor xh(x.data(), DType::F32, {rows, cols}), yh(y.data(), DType::F32, {rows, cols}),
          wh(w.data(), DType::F32, {cols});
      DeviceTensor xd(be(), act(), {rows, cols}, 4), yd(be(), act(), {rows, cols}, 4), wd(be(), DType::F32, {cols});
      xd.upload_floats(x);
      yd.upload_floats(y);
      wd.upload_values(w);
      std::vector<float> want(n);
      Tensor wanth(want.data(), DType::F32, {rows, cols});

      ref.rms_norm(xh, wh, 1e-5f, wanth);
      DeviceTensor out(be(), act(), {rows, cols}, 4);
      be().rms_norm(*xd, *wd, 1e-5f, *out);
      ASSERT_EQ(compare(out.download_floats(), want, unit_scale(want), u.float_ops, u.rounding, "rms_norm " + what), "");
      out.expect_guards_intact("rms_norm");
      DeviceTensor inplace(be(), act(), {rows, cols});
      inplace.upload_floats(x);
      be().rms_norm(*inplace, *wd, 1e-5f, *inplace);
      ASSERT_EQ(compare(inplace.download_floats(), want, unit_scale(want), u.float_ops, u.rounding,
                        "rms_norm in place " + what),
                "");

      for (GluActivation a : {GluActivation::kSilu, GluActivation::kGeluTanh, GluActivation::kSigmoid}) {
        ref.glu(xh, yh, a, wanth);
        DeviceTensor g(be(), act(), {rows, cols}, 4);
        be().glu(*xd, *yd, a, *g);
        ASSERT_EQ(compare(g.download_floats(), want, unit_scale(want), u.float_ops, u.rounding, "glu " + what), "");
        g.expect_guards_intact("glu");
      }
      // gpt-oss's clamped SwiGLU over inputs four times as wide, so that
      // both clamps (gate <= 7, |up| <= 7) fire.
      {
        std::vector<float> gate4 = x, up4 = y;
        for (float& v : gate4) v *= 4.0f;
        for (float& v : up4) v *= 4.0f;
        Tensor g4h(gate4.data(), DType::F32, {rows, cols}), u4h(up4.data(), DType::F32, {rows, cols});
        DeviceTensor g4(be(), act(), {rows, cols}), u4(be(), act(), {rows, cols}), g(be(), act(), {rows, cols}, 4);
        g4.upload_floats(gate4);
        u4.upload_floats(up4);
        ref.glu(g4h, u4h, GluActivation::kSwigluClamped, wanth);
        be().glu(*g4, *u4, GluActivation::kSwigluClamped, *g);
        ASSERT_EQ(compare(g.download_floats(), want, unit_scale(want), u.float_ops, u.rounding,
                          "clamped swiglu " + what),
                  "");
        g.expect_guards_intact("clamped swiglu");
      }

      std::vector<float> sum = x;
      Tensor sumh(sum.data(), DType::F32, {rows, cols});
      ref.add(sumh, yh);
      DeviceTensor s(be(), act(), {rows, cols}, 4);
      s.upload_floats(x);
      be().add(*s, *yd);
      ASSERT_EQ(compare(s.download_floats(), sum, unit_scale(sum), elementwise, u.rounding, "add " + what), "");
      ref.scale(sumh, 0.37f);
      be().scale(*s, 0.37f);
      // Scaling the rounded sum rounds once more.
      ASSERT_EQ(compare(s.download_floats(), sum, unit_scale(sum), elementwise, 2 * u.rounding, "scale " + what), "");
      s.expect_guards_intact("add and scale");
    }
  }
}

// Both pair orderings, partial rotary dimensions, and the scaled tables: a
// factor on cos/sin (YaRN, LongRoPE) and a query temperature, which scales
// the unrotated dimensions too.
TEST_P(RowOps, RopeInBothOrderingsAgainstReference) {
  std::mt19937 rng(10);
  const BackendUnderTest& u = GetParam();
  for (const auto& [scaled, neox] : {std::pair{false, false}, std::pair{false, true}, std::pair{true, false},
                                     std::pair{true, true}}) {
    for (int dim : {64, 32, 128}) {
      const std::int64_t T = 13, heads = 3, hd = dim == 128 ? 128 : 64;
      std::vector<float> inv_freq;
      for (int i = 0; i < dim / 2; ++i) inv_freq.push_back(static_cast<float>(std::pow(10000.0, -2.0 * i / dim)));
      RopeTable host;
      host.neox = neox;
      host.dim = dim;
      host.inv_freq = Tensor(inv_freq.data(), DType::F32, {dim / 2});
      if (scaled) {
        host.attention_factor = 1.3466f;
        host.temperature_beta = 0.1f;
        host.temperature_offset = 1.0f;
        host.temperature_length = 150.0f;  // positions 0 to 1164: periods 0 to 7
      }
      DeviceTensor table(be(), DType::F32, {dim / 2});
      table.upload_values(inv_freq);
      RopeTable device = host;
      device.inv_freq = *table;
      std::vector<std::int32_t> pos(T);
      for (std::int64_t t = 0; t < T; ++t) pos[t] = static_cast<std::int32_t>(t * 97);
      auto x = rounded_to(act(), random_floats(static_cast<std::size_t>(T * heads * hd), rng));
      std::vector<float> want = x;
      Tensor wh(want.data(), DType::F32, {T, heads, hd}), ph(pos.data(), DType::I32, {T});
      ReferenceBackend().rope(wh, ph, host);
      DeviceTensor xd(be(), act(), {T, heads, hd}), pd(be(), DType::I32, {T});
      xd.upload_floats(x);
      pd.upload_values(pos);
      be().rope(*xd, *pd, device);
      const std::string what = fmt::format("{} dim {}{}", neox ? "neox" : "normal", dim, scaled ? " scaled" : "");
      EXPECT_EQ(compare(xd.download_floats(), want, unit_scale(want), u.exact_elementwise ? 0.0 : u.float_ops,
                        u.rounding, what),
                "");
      xd.expect_guards_intact("rope");
    }
  }
}

// The logits' multiplier and soft-cap (Granite, Gemma 2) on f32 logits.
TEST_P(RowOps, ScaleLogitsAgainstReference) {
  std::mt19937 rng(15);
  const BackendUnderTest& u = GetParam();
  for (const auto& [scale, softcap] : {std::pair{0.25f, 0.0f}, std::pair{1.0f, 30.0f}, std::pair{2.0f, 5.0f}}) {
    for (std::int64_t cols : {1, 9, 384}) {
      const std::int64_t rows = 5;
      auto x = random_floats(static_cast<std::size_t>(rows * cols), rng, 20.0f);
      std::vector<float> want = x;
      Tensor wh(want.data(), DType::F32, {rows, cols});
      ReferenceBackend().scale_logits(wh, scale, softcap);
      DeviceTensor xd(be(), DType::F32, {rows, cols}, 4);
      xd.upload_floats(x);
      be().scale_logits(*xd, scale, softcap);
      const std::string what = fmt::format("scale {} softcap {} [{}, {}]", scale, softcap, rows, cols);
      EXPECT_EQ(compare(xd.download_floats(), want, unit_scale(want), u.exact_elementwise ? 0.0 : u.float_ops, 0.0,
                        what),
                "");
      xd.expect_guards_intact("scale_logits");
    }
  }
}

TEST_P(RowOps, GatherRowsCopiesRowsExactly) {
  std::mt19937 rng(14);
  for (std::int64_t cols : {1, 33, 576}) {
    const std::int64_t rows = 9;
    auto x = rounded_to(act(), random_floats(static_cast<std::size_t>(rows * cols), rng));
    const std::vector<std::int32_t> pick = {8, 0, 3, 3, 7};
    DeviceTensor xd(be(), act(), {rows, cols}), id(be(), DType::I32, {5}), out(be(), act(), {5, cols}, 4);
    xd.upload_floats(x);
    id.upload_values(pick);
    be().gather_rows(*xd, *id, *out);
    std::vector<float> want;
    for (std::int32_t r : pick) want.insert(want.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
    EXPECT_EQ(compare(out.download_floats(), want, {}, 0, 0, fmt::format("cols {}", cols)), "");
    out.expect_guards_intact("gather_rows");
  }
}

FOLIO_OP_SUITE(RowOps);

}  // namespace
}  // namespace folio::testing
