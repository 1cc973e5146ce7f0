// The matrix ops of every backend against the f32 reference: matmul for
// every weight type and shape (weights loaded as a model's are, from
// misaligned host bytes), the grouped matmuls and glu_matmul (the same bits
// as one op each), embedding, and rule 5: a row's result never depends on the
// other rows of its batch.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <bit>
#include <cmath>

#include "backend/reference/reference_backend.h"
#include "core/error.h"
#include "support/op_suite.h"
#include "tensor/quantize.h"

namespace folio::testing {
namespace {

class MatmulOps : public OpTest {};

// One matmul problem: weights [m, k] of a type, activations [n, k] (rounded
// to the backend's activation type, as the reference sees them too), the
// reference's outputs and the scale of each (sum |w x| + |bias|), and the
// error 8-bit activations per block explain (for the q8 kernels).
struct Problem {
  DType type;
  std::int64_t m, k, n;
  HostBytes w;
  std::vector<float> x, bias, want;
  std::vector<double> scale, act_err;

  Problem(DType weight_type, std::int64_t rows, std::int64_t cols, std::int64_t tokens, DType act, std::mt19937& rng)
      : type(weight_type), m(rows), k(cols), n(tokens), w(static_cast<std::size_t>(row_bytes(weight_type, cols) * rows), 1) {
    fill_weights(type, m, k, w.data(), rng);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    x.resize(static_cast<std::size_t>(n * k));
    for (auto& v : x) v = unit(rng);
    if (n > 3)
      for (std::int64_t i = 0; i < std::min<std::int64_t>(k, 32); ++i) x[3 * k + i] = 0.0f;  // a zero block
    for (std::size_t i = 0; i < x.size(); i += 97) x[i] *= 8.0f;                             // and outliers
    x = rounded_to(act, x);
    for (std::int64_t i = 0; i < m; ++i) bias.push_back(unit(rng));
    want.resize(static_cast<std::size_t>(n * m));
    Tensor y(want.data(), DType::F32, {n, m}), b(bias.data(), DType::F32, {m});
    ReferenceBackend().matmul(host_weights(), Tensor(x.data(), DType::F32, {n, k}), y, &b);
    std::vector<float> wf(static_cast<std::size_t>(m * k));
    for (std::int64_t o = 0; o < m; ++o) dequantize_row(type, w.data() + o * row_bytes(type, k), wf.data() + o * k, k);
    const std::int64_t block = act_block_elems(type);
    scale.assign(want.size(), 0.0);
    act_err.assign(want.size(), 0.0);
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t o = 0; o < m; ++o) {
        double s = std::fabs(bias[o]), e = 0;
        for (std::int64_t b0 = 0; b0 < k; b0 += block) {
          float amax = 0.0f;
          for (std::int64_t i = b0; i < std::min(k, b0 + block); ++i) amax = std::max(amax, std::fabs(x[t * k + i]));
          for (std::int64_t i = b0; i < std::min(k, b0 + block); ++i) {
            s += std::fabs(double(wf[o * k + i]) * x[t * k + i]);
            e += std::fabs(wf[o * k + i]) * (amax / 127.0 * 0.5001);
          }
        }
        scale[t * m + o] = s;
        act_err[t * m + o] = e;
      }
  }
  Tensor host_weights(std::int64_t rows = -1) { return Tensor(w.data(), type, {rows < 0 ? m : rows, k}); }
};

// The bound of each output of p's first n tokens and m rows (the whole
// problem's row stride), for backend u.
std::string check(const Problem& p, std::int64_t m, std::int64_t n, const std::vector<float>& got,
                  const BackendUnderTest& u, bool rounded, const std::string& what) {
  std::vector<float> want;
  std::vector<double> scale;
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t o = 0; o < m; ++o) {
      const std::size_t i = static_cast<std::size_t>(t * p.m + o);
      want.push_back(p.want[i]);
      double s = u.float_ops * p.scale[i];
      if (u.q8_activations && !is_float(p.type))
        s += p.act_err[i] + 4.0 * (double(p.k) / 32 + 16) * 0x1p-24 * p.scale[i];
      scale.push_back(s);
    }
  return compare(got, want, scale, 1.0, rounded ? u.rounding : 0.0, what);
}

TEST_P(MatmulOps, EveryWeightTypeAndShapeAgainstReference) {
  std::mt19937 rng(4);
  const BackendUnderTest& u = GetParam();
  for (DType type : weight_types()) {
    for (std::int64_t k : matmul_widths(type)) {
      Problem p(type, 33, k, 64, act(), rng);
      DeviceWeight w(be(), p.host_weights());
      DeviceTensor bias(be(), DType::F32, {p.m});
      bias.upload_values(p.bias);
      for (std::int64_t n : {1, 3, 5, 17, 64}) {
        DeviceTensor x(be(), act(), {n, k}, 4);
        x.upload_floats(std::vector<float>(p.x.begin(), p.x.begin() + n * k));
        for (std::int64_t m : {1, 9, 33}) {
          // Activations out, or f32 out (the logits), with a bias or none.
          for (DType out : {act(), DType::F32}) {
            if (out == act() && m == 9) continue;
            DeviceTensor y(be(), out, {n, m});
            DeviceTensor bm(be(), DType::F32, {m});
            bm.upload_values(std::vector<float>(p.bias.begin(), p.bias.begin() + m));
            Tensor wm = w.tensor.rows_view(0, m);
            be().matmul(wm, *x, *y, &*bm);
            const std::string what = fmt::format("{} m={} k={} n={} out {}", name(type), m, k, n, name(out));
            const std::string failure = check(p, m, n, y.download_floats(), u, out != DType::F32, what);
            ASSERT_EQ(failure, "");
            y.expect_guards_intact(what);
          }
        }
      }
    }
  }
}

// matmuls (one input, several weights in one pass) and glu_matmul against one
// matmul per weight and glu then matmul: ==, targets with fewer rows than a
// panel, with and without bias.
TEST_P(MatmulOps, GroupedAndGluMatmulsGiveTheBitsOfSingleOps) {
  std::mt19937 rng(7);
  for (DType type : weight_types()) {
    const std::int64_t k = is_float(type) ? 517 : 512, m = 40;
    Problem p(type, m, k, 17, act(), rng);
    DeviceWeight w(be(), p.host_weights());
    DeviceTensor bias(be(), DType::F32, {m});
    bias.upload_values(p.bias);
    for (std::int64_t n : {1, 2, 5, 17}) {
      DeviceTensor x(be(), act(), {n, k});
      x.upload_floats(std::vector<float>(p.x.begin(), p.x.begin() + n * k));
      const std::int64_t ms[] = {40, 3, 13};
      std::vector<Tensor> wv;
      std::vector<std::unique_ptr<DeviceTensor>> singles, grouped, biases;
      std::vector<MatmulTarget> targets;
      for (std::size_t i = 0; i < 3; ++i) wv.push_back(w.tensor.rows_view(0, ms[i]));
      for (std::size_t i = 0; i < 3; ++i) {
        singles.push_back(std::make_unique<DeviceTensor>(be(), act(), std::initializer_list<std::int64_t>{n, ms[i]}));
        grouped.push_back(std::make_unique<DeviceTensor>(be(), act(), std::initializer_list<std::int64_t>{n, ms[i]}));
        biases.push_back(std::make_unique<DeviceTensor>(be(), DType::F32, std::initializer_list<std::int64_t>{ms[i]}));
        biases.back()->upload_values(std::vector<float>(p.bias.begin(), p.bias.begin() + ms[i]));
        const Tensor* b = i == 1 ? nullptr : &**biases[i];
        be().matmul(wv[i], *x, **singles[i], b);
        targets.push_back({&wv[i], &**grouped[i], b});
      }
      be().matmuls(*x, targets);
      for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(grouped[i]->download(), singles[i]->download()) << name(type) << " n=" << n << " target " << i;
        grouped[i]->expect_guards_intact("matmuls");
      }
      // glu_matmul: x as the gate, fresh activations as up.
      std::vector<float> upv = rounded_to(act(), random_floats(static_cast<std::size_t>(n * k), rng));
      DeviceTensor up(be(), act(), {n, k});
      up.upload_floats(upv);
      for (GluActivation a : {GluActivation::kSilu, GluActivation::kGeluTanh, GluActivation::kSwigluClamped}) {
        DeviceTensor g1(be(), act(), {n, k}), g2(be(), act(), {n, k});
        g1.upload(x.download().data(), x->bytes());
        g2.upload(x.download().data(), x->bytes());
        DeviceTensor y1(be(), act(), {n, 13}), y2(be(), act(), {n, 13});
        be().glu(*g1, *up, a, *g1);
        be().matmul(wv[2], *g1, *y1, nullptr);
        be().glu_matmul(wv[2], *g2, *up, a, *y2);
        EXPECT_EQ(y2.download(), y1.download()) << "glu_matmul " << name(type) << " n=" << n;
        y2.expect_guards_intact("glu_matmul");
      }
      if (HasFailure()) return;
    }
  }
}

// Rule 5: each token alone gives the bits it gets in any batch at any place.
TEST_P(MatmulOps, ARowNeverDependsOnItsBatch) {
  if (!GetParam().batch_invariant) GTEST_SKIP() << GetParam().label << " is not batch invariant by choice";
  std::mt19937 rng(5);
  const std::int64_t m = 13, n = 24;
  for (DType type : weight_types()) {
    const std::int64_t k = is_float(type) ? 517 : 512;
    Problem p(type, m, k, n, act(), rng);
    DeviceWeight w(be(), p.host_weights());
    DeviceTensor b(be(), DType::F32, {m});
    b.upload_values(p.bias);
    std::vector<std::vector<std::uint8_t>> alone;
    for (std::int64_t t = 0; t < n; ++t) {
      DeviceTensor x(be(), act(), {1, k}), y(be(), act(), {1, m});
      x.upload_floats(std::vector<float>(p.x.begin() + t * k, p.x.begin() + (t + 1) * k));
      be().matmul(w.tensor, *x, *y, &*b);
      alone.push_back(y.download());
    }
    for (std::int64_t count : {2, 5, 8, 17, 24}) {
      const std::int64_t first = count * 5 % (n - count + 1);
      DeviceTensor x(be(), act(), {count, k}), y(be(), act(), {count, m});
      x.upload_floats(std::vector<float>(p.x.begin() + first * k, p.x.begin() + (first + count) * k));
      be().matmul(w.tensor, *x, *y, &*b);
      const std::vector<std::uint8_t> all = y.download();
      const std::size_t row = all.size() / static_cast<std::size_t>(count);
      for (std::int64_t t = 0; t < count; ++t)
        ASSERT_TRUE(std::equal(alone[first + t].begin(), alone[first + t].end(), all.begin() + t * row))
            << name(type) << ": token " << first + t << " in a batch of " << count;
    }
  }
}

class EmbeddingOps : public MatmulOps {};

TEST_P(EmbeddingOps, EmbeddingMatchesReference) {
  std::mt19937 rng(3);
  for (DType type : weight_types()) {
    const std::int64_t vocab = 11, dim = is_float(type) ? 40 : 512;
    HostBytes table(static_cast<std::size_t>(row_bytes(type, dim) * vocab), 1);
    fill_weights(type, vocab, dim, table.data(), rng);
    const std::vector<std::int32_t> ids = {3, 0, 10, 3, 7};
    const auto n = static_cast<std::int64_t>(ids.size());
    std::vector<float> want(static_cast<std::size_t>(n * dim));
    Tensor host(table.data(), type, {vocab, dim});
    Tensor wt(want.data(), DType::F32, {n, dim}), it(const_cast<std::int32_t*>(ids.data()), DType::I32, {n});
    ReferenceBackend().embedding(host, it, wt);
    DeviceWeight w(be(), host);
    DeviceTensor id(be(), DType::I32, {n}), out(be(), act(), {n, dim});
    id.upload_values(ids);
    be().embedding(w.tensor, *id, *out);
    EXPECT_EQ(compare(out.download_floats(), want, {}, 0, GetParam().rounding, std::string(name(type))), "");
    out.expect_guards_intact("embedding");
    // An id outside the vocabulary is an error, not a read out of bounds
    // (a device backend reports what its kernels find at the next sync).
    DeviceTensor bad(be(), DType::I32, {1});
    bad.upload_values(std::vector<std::int32_t>{static_cast<std::int32_t>(vocab)});
    DeviceTensor one(be(), act(), {1, dim});
    EXPECT_THROW(
        {
          be().embedding(w.tensor, *bad, *one);
          be().synchronize();
        },
        Error)
        << name(type);
  }
}

FOLIO_MATMUL_SUITE(MatmulOps);
FOLIO_OP_SUITE(EmbeddingOps);

}  // namespace
}  // namespace folio::testing
