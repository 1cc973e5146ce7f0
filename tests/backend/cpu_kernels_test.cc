// The CPU backend's own kernels, beyond the op suite (tests/backend/ops): the
// SIMD activation quantizer and dequantizers bit-exact with their scalar
// references, the q8 kernels against the exact dot of the same quantized
// activations (float rounding only), packed weights (the same bits as the
// file's layout), every SIMD level giving the same bits, and thread counts
// changing none (rule 5).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/activation_quant.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "backend/reference/reference_backend.h"
#include "support/op_suite.h"
#include "tensor/half.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

using testing::fill_weights;
using testing::is_kquant;

constexpr double kU = 0x1p-24;  // unit roundoff of float

const std::vector<DType>& kTypes = testing::weight_types();

// The caps (CpuFeatures::detect) of each distinct SIMD level this machine has.
std::vector<std::string> level_caps() {
  std::vector<std::string> caps;
  std::set<std::string> seen;
  for (const char* cap : {"avx2", "avx512", ""}) {
    const CpuFeatures f = CpuFeatures::detect(cap);
    if (f.avx2 && seen.insert(f.level()).second) caps.push_back(cap);
  }
  return caps;
}

const MatmulKernels& kernels_for(const std::string& cap) {
  const CpuFeatures f = CpuFeatures::detect(cap);
  if (f.avx512_vnni) return matmul_kernels_avx512_vnni();
  if (f.avx512) return matmul_kernels_avx512();
  return matmul_kernels_avx2();
}

std::string level_name(const std::string& cap) { return CpuFeatures::detect(cap).level(); }

// Bytes at an odd address, so that no kernel may rely on alignment.
using Misaligned = testing::HostBytes;

// Random activations [n, k] with a zero block (token 3) and a few outliers.
void fill_activations(std::int64_t n, std::int64_t k, float* x, std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (std::int64_t i = 0; i < n * k; ++i) x[i] = unit(rng);
  if (n > 3)
    for (std::int64_t i = 0; i < std::min<std::int64_t>(k, 32); ++i) x[3 * k + i] = 0.0f;
  for (std::int64_t i = 0; i < n * k; i += 97) x[i] *= 8.0f;
}

std::vector<float> dequantized(DType type, const std::uint8_t* w, std::int64_t rows, std::int64_t k) {
  std::vector<float> out(static_cast<std::size_t>(rows * k));
  for (std::int64_t r = 0; r < rows; ++r) dequantize_row(type, w + r * row_bytes(type, k), out.data() + r * k, k);
  return out;
}

// ---- the SIMD quantizer and dequantizers are the references, bit for bit ----

TEST(CpuMatmul, ActivationQuantizerMatchesReference) {
  std::mt19937 rng(1);
  for (const std::string& cap : level_caps()) {
    for (ActFormat format :
         {ActFormat::kQ8x32, ActFormat::kQ8x256, ActFormat::kQ8x256Packed}) {
      const bool k256 = format == ActFormat::kQ8x256 || format == ActFormat::kQ8x256Packed;
      for (std::int64_t k : {256, 512, 1536, 800}) {
        if (k256 && k % 256 != 0) continue;
        const ActQ8Layout layout = ActQ8Layout::make(format, k);
        std::vector<float> x(static_cast<std::size_t>(4 * k));
        fill_activations(4, k, x.data(), rng);
        x[5] = 1e-38f;  // a block whose 127 / amax overflows is all zeros
        for (std::int64_t i = 1; i < 256; ++i) x[i] = 0.0f;
        std::vector<std::byte> want(layout.row_bytes), got(layout.row_bytes);
        for (int t = 0; t < 4; ++t) {
          quantize_activation_reference(layout, x.data() + t * k, want.data());
          kernels_for(cap).quantize(layout, x.data() + t * k, got.data());
          ASSERT_EQ(std::memcmp(want.data(), got.data(), layout.sums_offset), 0) << level_name(cap) << " k=" << k;
          const std::size_t sums = k256 ? k / 16 * 2 : k / 32 * 4;
          ASSERT_EQ(std::memcmp(want.data() + layout.sums_offset, got.data() + layout.sums_offset, sums), 0);
          if (format == ActFormat::kQ8x256Packed) {
            ASSERT_EQ(std::memcmp(want.data() + layout.dsums_offset, got.data() + layout.dsums_offset, k / 32 * 4), 0);
          }
          // Each value is within half a step of its float.
          for (std::int64_t i = 0; i < k; ++i) {
            const std::int64_t b0 = i / layout.block_elems * layout.block_elems;
            float amax = 0.0f;
            for (std::int64_t j = b0; j < b0 + layout.block_elems; ++j) amax = std::max(amax, std::fabs(x[t * k + j]));
            const float err = std::fabs(quantized_activation_value(layout, want.data(), i) - x[t * k + i]);
            ASSERT_LE(err, amax / 127.0f * 0.5001f + 1e-37f) << "element " << i;
          }
        }
      }
    }
  }
}

TEST(CpuMatmul, SimdDequantizersMatchReference) {
  std::mt19937 rng(2);
  for (const std::string& cap : level_caps())
    for (DType type : kTypes) {
      const std::int64_t k = is_float(type) ? 299 : 768;
      Misaligned w(static_cast<std::size_t>(row_bytes(type, k)), 3);
      fill_weights(type, 1, k, w.data(), rng);
      std::vector<float> want(static_cast<std::size_t>(k)), got(static_cast<std::size_t>(k));
      dequantize_row(type, w.data(), want.data(), k);
      kernels_for(cap).dequantize[static_cast<int>(type)](w.data(), got.data(), k);
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
          << name(type) << " at " << level_name(cap);
    }
}

// The 8-bit scales of MXFP4 and NVFP4 decode in SIMD lanes: every byte, in
// random blocks (E8M0's largest scales overflow to infinities, compared too).
TEST(CpuMatmul, SimdDequantizersTakeEveryScaleByte) {
  std::mt19937 rng(3);
  for (const std::string& cap : level_caps())
    for (DType type : {DType::MXFP4, DType::NVFP4}) {
      const std::int64_t k = 64 * 512;
      const auto bytes = static_cast<std::size_t>(row_bytes(type, k));
      Misaligned w(bytes, 1);
      for (std::size_t i = 0; i < bytes; ++i) w.data()[i] = static_cast<std::uint8_t>(rng());
      std::vector<float> want(static_cast<std::size_t>(k)), got(static_cast<std::size_t>(k));
      dequantize_row(type, w.data(), want.data(), k);
      kernels_for(cap).dequantize[static_cast<int>(type)](w.data(), got.data(), k);
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
          << name(type) << " at " << level_name(cap);
    }
}

// ---- every type x precision x level x shape against the reference ----

struct Problem {
  DType type;
  std::int64_t m, k, n;           // the largest shape; smaller ones are views of it
  Misaligned w;
  Misaligned x;                   // floats, 4 bytes off a 32-byte boundary
  std::vector<float> bias;
  std::vector<float> ref;         // [n, m] the reference backend's y
  std::vector<double> abs_sum;    // [n, m] sum |w * x|
  std::vector<double> act_err;    // [n, m] sum |w| * half a quantization step of x
  std::vector<double> q8_exact;   // [n, m] sum w * dequantized(quantize(x)), in double
  std::vector<double> q8_abs;     // [n, m] sum |w * dequantized(quantize(x))|

  Problem(DType weight_type, std::int64_t rows, std::int64_t cols, std::int64_t tokens, std::mt19937& rng)
      : type(weight_type), m(rows), k(cols), n(tokens),
        w(static_cast<std::size_t>(row_bytes(weight_type, cols) * rows), 1),
        x(static_cast<std::size_t>(tokens * cols) * sizeof(float), 4) {
    fill_weights(type, m, k, w.data(), rng);
    fill_activations(n, k, xf(), rng);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    for (std::int64_t i = 0; i < m; ++i) bias.push_back(unit(rng));
    ref.resize(static_cast<std::size_t>(n * m));
    Tensor y(ref.data(), DType::F32, {n, m});
    Tensor b(bias.data(), DType::F32, {m});
    ReferenceBackend().matmul(weights(m), activations(0, n), y, &b);

    const std::vector<float> wf = dequantized(type, w.data(), m, k);
    abs_sum.assign(ref.size(), 0.0);
    act_err.assign(ref.size(), 0.0);
    q8_exact.assign(ref.size(), 0.0);
    q8_abs.assign(ref.size(), 0.0);
    if (is_float(type)) {
      for (std::int64_t t = 0; t < n; ++t)
        for (std::int64_t o = 0; o < m; ++o)
          for (std::int64_t i = 0; i < k; ++i) abs_sum[t * m + o] += std::fabs(double(wf[o * k + i]) * xf()[t * k + i]);
      return;
    }
    const ActQ8Layout layout =
        ActQ8Layout::make(testing::act_block_elems(type) == 256 ? ActFormat::kQ8x256 : ActFormat::kQ8x32, k);
    std::vector<std::byte> row(layout.row_bytes);
    for (std::int64_t t = 0; t < n; ++t) {
      const float* xt = xf() + t * k;
      quantize_activation_reference(layout, xt, row.data());
      for (std::int64_t o = 0; o < m; ++o) {
        double exact = 0, q_abs = 0, a_abs = 0, err = 0;
        for (std::int64_t b0 = 0; b0 < k; b0 += layout.block_elems) {
          float amax = 0.0f;
          for (std::int64_t i = b0; i < b0 + layout.block_elems; ++i) amax = std::max(amax, std::fabs(xt[i]));
          for (std::int64_t i = b0; i < b0 + layout.block_elems; ++i) {
            const double wv = wf[o * k + i], xq = quantized_activation_value(layout, row.data(), i);
            exact += wv * xq;
            q_abs += std::fabs(wv * xq);
            a_abs += std::fabs(wv * xt[i]);
            err += std::fabs(wv) * (amax / 127.0 * 0.5001);
          }
        }
        q8_exact[t * m + o] = exact + bias[o];
        q8_abs[t * m + o] = q_abs + std::fabs(bias[o]);
        abs_sum[t * m + o] = a_abs;
        act_err[t * m + o] = err;
      }
    }
  }

  float* xf() { return reinterpret_cast<float*>(x.data()); }
  Tensor weights(std::int64_t rows) { return Tensor(w.data(), type, {rows, k}); }
  Tensor activations(std::int64_t first, std::int64_t count) { return Tensor(xf() + first * k, DType::F32, {count, k}); }
};

// Checks y [n, m] of the tokens [0, n) and rows [0, m) of p.
void check(Problem& p, std::int64_t m, std::int64_t n, const std::vector<float>& y, MatmulPrecision precision,
           const std::string& what) {
  const bool q8 = precision == MatmulPrecision::kQ8 && !is_float(p.type);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t o = 0; o < m; ++o) {
      const std::size_t i = static_cast<std::size_t>(t * p.m + o);
      const double got = y[t * m + o], ref = p.ref[i];
      const double f32_tol = 1e-5 * (p.abs_sum[i] + std::fabs(p.bias[o])) + 1e-30;
      if (!q8) {
        ASSERT_NEAR(got, ref, f32_tol) << what << " token " << t << " row " << o;
        continue;
      }
      // The integer kernels against the exact dot with the same quantized activations:
      // float rounding only, a few units per block.
      const double q8_tol = 4.0 * (double(p.k) / 32 + 16) * kU * p.q8_abs[i] + 1e-30;
      ASSERT_NEAR(got, p.q8_exact[i], q8_tol) << what << " token " << t << " row " << o << " (vs quantized reference)";
      // And against the f32 reference: no more than 8-bit activations explain.
      ASSERT_NEAR(got, ref, p.act_err[i] + f32_tol + q8_tol) << what << " token " << t << " row " << o;
    }
}

// The q8 kernels of every level against the exact dot of the same quantized
// activations, and against the f32 reference (the op suite checks that bound
// and the f32 kernels for every backend).
TEST(CpuMatmul, Q8KernelsAgainstTheExactDotOfTheirActivations) {
  std::mt19937 rng(4);
  const std::int64_t row_counts[] = {1, 7, 8, 9, 33};
  const std::int64_t token_counts[] = {0, 1, 3, 4, 5, 17, 64};
  int checked = 0;
  for (DType type : kTypes) {
    if (is_float(type)) continue;  // float weights run f32 kernels at either precision
    for (std::int64_t k : testing::matmul_widths(type)) {
      Problem p(type, 33, k, 64, rng);
      // One thread: BatchPositionAndThreadsNeverChangeABit shows that two give the same bits.
      for (const std::string& cap : level_caps())
        for (MatmulPrecision precision : {MatmulPrecision::kQ8}) {
          CpuBackend cpu(1, cap, precision);
          for (std::int64_t m : row_counts)
            for (std::int64_t n : token_counts) {
              std::vector<float> y(static_cast<std::size_t>(std::max<std::int64_t>(1, n * m)), -7.0f);
              Tensor yt(y.data(), DType::F32, {n, m});
              Tensor b(p.bias.data(), DType::F32, {m});
              cpu.matmul(p.weights(m), p.activations(0, n), yt, &b);
              const std::string what = std::string(name(type)) + " " + level_name(cap) +
                                       (precision == MatmulPrecision::kQ8 ? " q8" : " f32") + " m=" + std::to_string(m) +
                                       " k=" + std::to_string(k) + " n=" + std::to_string(n);
              if (n == 0) {
                EXPECT_EQ(y[0], -7.0f) << what;
                continue;
              }
              check(p, m, n, y, precision, what);
              if (HasFatalFailure()) return;
              ++checked;
            }
        }
    }
  }
  RecordProperty("shapes_checked", checked);
}

// ---- rule 5: a result never depends on batch, position, tile or threads ----

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

TEST(CpuMatmul, BatchPositionAndThreadsNeverChangeABit) {
  std::mt19937 rng(5);
  const std::int64_t m = 13, n = 64;
  for (DType type : kTypes) {
    const std::int64_t k = is_float(type) ? 517 : 512;
    Problem p(type, m, k, n, rng);
    Tensor b(p.bias.data(), DType::F32, {m});
    for (const std::string& cap : level_caps())
      for (MatmulPrecision precision : {MatmulPrecision::kQ8, MatmulPrecision::kF32}) {
        CpuBackend one(1, cap, precision), two(2, cap, precision);
        std::vector<float> single(static_cast<std::size_t>(n * m));
        for (std::int64_t t = 0; t < n; ++t) {
          Tensor yt(single.data() + t * m, DType::F32, {1, m});
          one.matmul(p.weights(m), p.activations(t, 1), yt, &b);
        }
        // Two threads at the native level only: the split over threads is the
        // same code at every level, and on a busy virtual machine each hand-off
        // to a second thread can cost milliseconds.
        std::vector<CpuBackend*> backends = {&one};
        if (cap == level_caps().back()) backends.push_back(&two);
        for (CpuBackend* cpu : backends)
          for (std::int64_t count = 2; count <= n; ++count) {
            const std::int64_t first = count * 5 % (n - count + 1);
            std::vector<float> y(static_cast<std::size_t>(count * m));
            Tensor yt(y.data(), DType::F32, {count, m});
            cpu->matmul(p.weights(m), p.activations(first, count), yt, &b);
            for (std::int64_t i = 0; i < count * m; ++i)
              ASSERT_EQ(bits(y[i]), bits(single[first * m + i]))
                  << name(type) << " " << level_name(cap) << (precision == MatmulPrecision::kQ8 ? " q8" : " f32")
                  << " threads=" << cpu->num_threads() << " batch of " << count << " from token " << first
                  << ": token " << first + i / m << " row " << i % m;
          }
      }
  }
}

// The kernels use one 256-bit layout at every level, so the levels agree to the bit.
TEST(CpuMatmul, EveryLevelGivesTheSameBits) {
  const std::vector<std::string> caps = level_caps();
  if (caps.size() < 2) GTEST_SKIP() << "one SIMD level on this machine";
  std::mt19937 rng(6);
  const std::int64_t m = 9, n = 7;
  for (DType type : kTypes) {
    Problem p(type, m, 512, n, rng);
    for (MatmulPrecision precision : {MatmulPrecision::kQ8, MatmulPrecision::kF32}) {
      std::vector<std::vector<float>> ys;
      for (const std::string& cap : caps) {
        ys.emplace_back(static_cast<std::size_t>(n * m));
        Tensor yt(ys.back().data(), DType::F32, {n, m});
        CpuBackend(1, cap, precision).matmul(p.weights(m), p.activations(0, n), yt, nullptr);
      }
      for (std::size_t l = 1; l < ys.size(); ++l)
        EXPECT_EQ(std::memcmp(ys[0].data(), ys[l].data(), ys[0].size() * sizeof(float)), 0)
            << name(type) << ": " << level_name(caps[0]) << " and " << level_name(caps[l]) << " differ";
    }
  }
}

// ---- packed weights: the same bits as the file's layout ----

const DType kPackableTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,
                                DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Row widths of a few blocks and of several super-blocks (K-quants).
std::vector<std::int64_t> packing_widths(DType type) {
  if (is_kquant(type)) return {256, 768, 1536};
  return {32, 224, 256, 288, 800, 1536};
}

// Packing a panel of rows (block32: up to 8 rows, the rest padding; K-quants:
// one row) and unpacking each of its rows gives back the file's bytes.
TEST(CpuMatmul, PackingRowsIsUndoneByUnpacking) {
  std::mt19937 rng(9);
  for (DType type : kPackableTypes)
    for (std::int64_t k : packing_widths(type)) {
      const auto bytes = static_cast<std::size_t>(row_bytes(type, k));
      const int panel = packed_panel_rows(type);
      ASSERT_EQ(panel, is_kquant(type) ? 1 : 8) << name(type);
      for (int rows : {1, 3, panel}) {
        if (rows > panel) continue;
        std::vector<std::uint8_t> plain(rows * bytes);
        fill_weights(type, rows, k, plain.data(), rng);
        std::vector<std::byte> packed(panel * bytes), back(bytes);
        pack_panel(type, reinterpret_cast<const std::byte*>(plain.data()), bytes, rows, packed.data(), k);
        for (int r = 0; r < rows; ++r) {
          unpack_row(type, packed.data(), r, back.data(), k);
          EXPECT_EQ(std::memcmp(plain.data() + r * bytes, back.data(), bytes), 0)
              << name(type) << " k=" << k << " row " << r << " of " << rows;
        }
        if (is_kquant(type)) continue;  // PackedKQuantCodesLieWhereTheLayoutSays
        // The first 4 codes of the last row's last block lie where the
        // layout says: vector 0 of the last group, lane `rows - 1`.
        const std::int64_t last = k / 32 - 1, bb = info(type).block_bytes;
        const std::int64_t halves = (type == DType::Q4_1 || type == DType::Q5_1) ? 2 : 1;
        const std::int64_t qh = (type == DType::Q5_0 || type == DType::Q5_1) ? 1 : 0;
        const std::int64_t codes = last * 8 * bb + 16 * halves + 32 * qh + 4 * (rows - 1);
        const std::int64_t plain_codes = (rows - 1) * bytes + last * bb + 2 * halves + 4 * qh;
        EXPECT_EQ(std::memcmp(plain.data() + plain_codes, packed.data() + codes, 4), 0) << name(type) << " k=" << k;
        // Padding rows are zero.
        for (int r = rows; r < panel; ++r)
          EXPECT_EQ(packed[last * 8 * bb + 2 * r], std::byte{0}) << name(type) << " padding row " << r;
      }
    }
}

// Packed K-quants keep every byte but the codes in place, and element 32 j + p
// lies where packed_weights.h says: a super-block whose codes are all zero but
// one element's in one field, packed, has that element's bits at the
// documented place only.
TEST(CpuMatmul, PackedKQuantCodesLieWhereTheLayoutSays) {
  struct Field {
    std::size_t offset;    // of the code field in the super-block
    int bits;              // per element in this field
    int file_byte_of_32;   // where element 32 (chunk 1, p = 0) lies in the file
    int file_shift_of_32;
  };
  struct Type {
    DType type;
    std::vector<Field> fields;
  };
  // Element 32 in the file (quant_blocks.h): Q4_K/Q5_K qs byte 0 high nibble;
  // Q6_K ql byte 32 low nibble; crumbs (Q2_K/Q3_K qs, Q6_K qh) byte 0 bits 2-3;
  // bits (Q3_K hmask, Q5_K qh) byte 0 bit 1.
  const Type types[] = {
      {DType::Q2_K, {{16, 2, 0, 2}}},
      {DType::Q3_K, {{32, 2, 0, 2}, {0, 1, 0, 1}}},
      {DType::Q4_K, {{16, 4, 0, 4}}},
      {DType::Q5_K, {{48, 4, 0, 4}, {16, 1, 0, 1}}},
      {DType::Q6_K, {{0, 4, 32, 0}, {128, 2, 0, 2}}},
  };
  for (const Type& t : types)
    for (const Field& f : t.fields) {
      const auto bytes = static_cast<std::size_t>(info(t.type).block_bytes);
      std::vector<std::byte> plain(bytes), packed(bytes);
      for (std::size_t i = 0; i < bytes; ++i) plain[i] = std::byte{static_cast<std::uint8_t>(i * 37 + 11)};
      auto in_codes = [&](std::size_t i) {
        for (const Field& c : t.fields)
          if (i >= c.offset && i < c.offset + static_cast<std::size_t>(256 * c.bits / 8)) return true;
        return false;
      };
      for (std::size_t i = 0; i < bytes; ++i)
        if (in_codes(i)) plain[i] = std::byte{0};
      const unsigned code = (1u << f.bits) - 1;
      plain[f.offset + f.file_byte_of_32] |= std::byte{static_cast<std::uint8_t>(code << f.file_shift_of_32)};
      pack_panel(t.type, plain.data(), bytes, 1, packed.data(), 256);
      // Element 32 (j = 1, p = 0) goes to byte 4 of its field, bits 0 .. bits - 1.
      for (std::size_t i = 0; i < bytes; ++i) {
        const std::byte want = !in_codes(i)         ? plain[i]
                               : i == f.offset + 4 ? std::byte{static_cast<std::uint8_t>(code)}
                                                   : std::byte{0};
        EXPECT_EQ(packed[i], want) << name(t.type) << " byte " << i << " (code field at " << f.offset << ")";
      }
    }
}

// The packed kernels against the file-layout kernels: ==, at every level, on
// shapes with a last partial group, odd row counts and every tile shape.
TEST(CpuMatmul, PackedWeightsGiveTheSameBits) {
  std::mt19937 rng(10);
  const std::int64_t row_counts[] = {1, 3, 33};
  const std::int64_t token_counts[] = {1, 2, 5, 16, 17, 33};
  int checked = 0;
  for (DType type : kPackableTypes)
    for (std::int64_t k : is_kquant(type) ? std::vector<std::int64_t>{256, 768}
                                          : std::vector<std::int64_t>{32, 96, 256, 288, 800, 896, 960}) {
      Problem p(type, 33, k, 33, rng);
      Tensor b(p.bias.data(), DType::F32, {p.m});
      for (const std::string& cap : level_caps()) {
        CpuBackend cpu(1, cap, MatmulPrecision::kQ8);
        Tensor packed = p.weights(p.m);
        const Buffer storage = cpu.load_weight(packed);
        ASSERT_EQ(packed.layout, Layout::kCpuPacked) << name(type);
        ASSERT_EQ(packed.data, storage.data());
        for (std::int64_t m : row_counts)
          for (std::int64_t n : token_counts) {
            const std::size_t size = static_cast<std::size_t>(n * m);
            std::vector<float> want(size), got(size, -7.0f);
            Tensor yw(want.data(), DType::F32, {n, m}), yg(got.data(), DType::F32, {n, m});
            Tensor bm(p.bias.data(), DType::F32, {m});
            const Tensor* bias = m % 2 == 1 ? &bm : nullptr;
            cpu.matmul(p.weights(m), p.activations(0, n), yw, bias);
            cpu.matmul(packed.rows_view(0, m), p.activations(0, n), yg, bias);
            for (std::size_t i = 0; i < size; ++i)
              ASSERT_EQ(bits(got[i]), bits(want[i])) << name(type) << " " << level_name(cap) << " m=" << m << " k=" << k
                                                     << " n=" << n << ": token " << i / m << " row " << i % m;
            ++checked;
          }
        // Two threads split the rows differently: still the same bits.
        CpuBackend two(2, cap, MatmulPrecision::kQ8);
        std::vector<float> want(static_cast<std::size_t>(17 * p.m)), got(want.size());
        Tensor yw(want.data(), DType::F32, {17, p.m}), yg(got.data(), DType::F32, {17, p.m});
        cpu.matmul(p.weights(p.m), p.activations(3, 17), yw, &b);
        two.matmul(packed, p.activations(3, 17), yg, &b);
        EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << name(type);
        // A token looked up in a packed table reads the file's values.
        std::int32_t id = 5;
        std::vector<float> row(static_cast<std::size_t>(k)), plain(row.size());
        Tensor ids(&id, DType::I32, {1}), out(row.data(), DType::F32, {1, k});
        cpu.embedding(packed, ids, out);
        dequantize_row(type, p.weights(p.m).row(5), plain.data(), k);
        EXPECT_EQ(std::memcmp(row.data(), plain.data(), row.size() * sizeof(float)), 0) << name(type) << " embedding";
      }
    }
  RecordProperty("shapes_checked", checked);
}

// Only the kQ8 kernels read packed weights; other types and precisions stay as they are.
TEST(CpuMatmul, OnlyBlock32AndKQuantWeightsOfTheQ8KernelsArePacked) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(row_bytes(DType::Q4_K, 256) * 2));
  Tensor grid(bytes.data(), DType::IQ4_NL, {2, 256});
  EXPECT_EQ(CpuBackend(1).load_weight(grid).data(), nullptr);
  EXPECT_EQ(grid.layout, Layout::kGguf);
  Tensor kquant(bytes.data(), DType::Q4_K, {2, 256});
  EXPECT_EQ(CpuBackend(1, {}, MatmulPrecision::kF32).load_weight(kquant).data(), nullptr);
  EXPECT_EQ(kquant.layout, Layout::kGguf);
  Tensor q8(bytes.data(), DType::Q8_0, {2, 64});
  EXPECT_EQ(CpuBackend(1, {}, MatmulPrecision::kF32).load_weight(q8).data(), nullptr);
  EXPECT_EQ(q8.layout, Layout::kGguf);
  EXPECT_EQ(ReferenceBackend().load_weight(q8).data(), nullptr);
  EXPECT_EQ(q8.data, bytes.data());
}

// Attention splits (token, head) items over threads: one thread or three
// give the same bits, for a prefill, a decode and a chunk together.
TEST(CpuAttention, ThreadsNeverChangeABit) {
  std::mt19937 rng(8);
  for (KvCacheDType type : {KvCacheDType(DType::F16), KvCacheDType(KvDType::kQ8_0)}) {
    CpuBackend one(1), three(3);
    const int heads = 14, kv_heads = 2, hd = 64, bs = 16;
    testing::DeviceKv cache(one, type, 3 * 34, kv_heads, bs, hd, hd, rng);
    testing::DeviceBatch batch(one, {{300, 300}, {530, 1}, {270, 20}}, testing::shuffled_blocks(3, 34, rng), bs);
    const std::int64_t T = batch.meta.num_tokens;
    auto q = testing::random_floats(static_cast<std::size_t>(T * heads * hd), rng);
    std::vector<float> a(q.size()), b(q.size());
    Tensor qt(q.data(), DType::F32, {T, heads, hd}), at(a.data(), DType::F32, {T, heads, hd}),
        bt(b.data(), DType::F32, {T, heads, hd});
    one.attention(qt, cache.device, batch.meta, {0.125f, 0, 0, {}}, at);
    three.attention(qt, cache.device, batch.meta, {0.125f, 0, 0, {}}, bt);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << type.name();
  }
}

}  // namespace
}  // namespace folio
