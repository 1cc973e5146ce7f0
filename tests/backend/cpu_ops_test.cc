// The CPU backend's ops other than matmul against the scalar reference, over
// KV types, head layouts, awkward sizes and misaligned rows; and attention's
// batch invariance: a query's output is bit-identical whether it is computed
// in a prefill, alone as a decode, or beside other sequences.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"
#include "tensor/half.h"
#include "tensor/kv_dtype.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A paged cache of `num_blocks` blocks filled with random K/V, each row
// encoded in its pool's type as write_kv would, and block tables that give
// each sequence its blocks in a shuffled order.
struct Cache {
  std::vector<std::uint8_t> k_codes, v_codes;
  std::vector<std::uint16_t> k_scales, v_scales;
  PagedKv kv;
  Cache(KvCacheDType type, std::int64_t num_blocks, std::int64_t kv_heads, std::int64_t block_size, std::int64_t hd,
        std::int64_t vd, std::mt19937& rng) {
    const std::int64_t rows = num_blocks * kv_heads * block_size;
    k_codes.resize(static_cast<std::size_t>(rows * kv_row_bytes(type.k, hd)));
    v_codes.resize(static_cast<std::size_t>(rows * kv_row_bytes(type.v, vd)));
    k_scales.resize(static_cast<std::size_t>(rows * kv_row_scales(type.k, hd)));
    v_scales.resize(static_cast<std::size_t>(rows * kv_row_scales(type.v, vd)));
    kv.block_size = block_size;
    kv.k = kv_pool_view(k_codes.data(), k_scales.data(), type.k, num_blocks, kv_heads, block_size, hd);
    kv.v = kv_pool_view(v_codes.data(), v_scales.data(), type.v, num_blocks, kv_heads, block_size, vd);
    for (const KvPool* p : {&kv.k, &kv.v}) {
      for (std::int64_t r = 0; r < rows; ++r) {
        auto vals = random_floats(static_cast<std::size_t>(p->dim), rng);
        encode_kv_row(p->type, vals.data(), p->dim, p->row(r), p->row_scale(r));
      }
    }
  }
};

// One step's metadata: sequences with (context length, new tokens) each.
struct Batch {
  std::vector<std::int32_t> positions, slots, query_start{0}, seq_lens, tables;
  std::int64_t width = 0;
  AttentionMetadata meta;

  Batch(const std::vector<std::pair<int, int>>& seqs, const std::vector<std::vector<std::int32_t>>& blocks,
        std::int64_t block_size) {
    for (const auto& b : blocks) width = std::max<std::int64_t>(width, static_cast<std::int64_t>(b.size()));
    for (std::size_t s = 0; s < seqs.size(); ++s) {
      const auto [len, fed] = seqs[s];
      for (int p = len - fed; p < len; ++p) {
        positions.push_back(p);
        slots.push_back(static_cast<std::int32_t>(blocks[s][p / block_size] * block_size + p % block_size));
      }
      query_start.push_back(query_start.back() + fed);
      seq_lens.push_back(len);
      std::vector<std::int32_t> row = blocks[s];
      row.resize(static_cast<std::size_t>(width), 0);
      tables.insert(tables.end(), row.begin(), row.end());
    }
    const auto T = static_cast<std::int64_t>(positions.size()), S = static_cast<std::int64_t>(seqs.size());
    meta.num_tokens = T;
    meta.num_seqs = S;
    meta.max_blocks_per_seq = width;
    meta.positions = Tensor(positions.data(), DType::I32, {T});
    meta.slot_mapping = Tensor(slots.data(), DType::I32, {T});
    meta.query_start = Tensor(query_start.data(), DType::I32, {S + 1});
    meta.seq_lens = Tensor(seq_lens.data(), DType::I32, {S});
    meta.block_tables = Tensor(tables.data(), DType::I32, {S * width});
  }
};

std::vector<std::vector<std::int32_t>> shuffled_blocks(int num_seqs, int per_seq, std::mt19937& rng) {
  std::vector<std::int32_t> all(static_cast<std::size_t>(num_seqs * per_seq));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int32_t>(i);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<std::vector<std::int32_t>> out;
  for (int s = 0; s < num_seqs; ++s) out.emplace_back(all.begin() + s * per_seq, all.begin() + (s + 1) * per_seq);
  return out;
}

struct AttentionCase {
  KvCacheDType kv_type;
  int heads, kv_heads, head_dim, block_size;
  std::int64_t window;
  float softcap;
};

TEST(CpuOps, AttentionMatchesReference) {
  const AttentionCase cases[] = {
      {DType::F32, 9, 3, 64, 16, 0, 0},    {DType::F16, 9, 3, 64, 16, 0, 0},   {DType::BF16, 9, 3, 64, 16, 0, 0},
      {DType::F16, 14, 2, 64, 16, 0, 0},   {DType::F16, 4, 1, 256, 16, 0, 0},  {DType::F32, 8, 8, 80, 32, 0, 0},
      {DType::F16, 6, 2, 12, 1, 0, 0},     {DType::F16, 4, 1, 64, 16, 37, 0},  {DType::F32, 4, 2, 33, 16, 0, 30.0f},
      {DType::F16, 16, 1, 128, 16, 300, 0},
      // The scaled types: rows decoded inside the kernel, K and V apart.
      {KvDType::kQ8_0, 9, 3, 64, 16, 0, 0},      {KvDType::kQ8_0, 4, 1, 256, 16, 0, 0},
      {KvDType::kQ8_0, 16, 1, 128, 16, 300, 0},  {KvDType::kQ8_0, 8, 8, 96, 32, 0, 30.0f},
      {KvDType::kFp8E4M3, 9, 3, 64, 16, 0, 0},   {KvDType::kFp8E4M3, 8, 8, 80, 32, 0, 0},
      {KvDType::kFp8E4M3, 6, 2, 12, 1, 0, 0},    {KvDType::kFp8E4M3, 4, 1, 64, 16, 37, 0},
      {{KvDType::kQ8_0, KvDType::kF16}, 14, 2, 64, 16, 0, 0},
      {{KvDType::kF16, KvDType::kFp8E4M3}, 14, 2, 64, 16, 0, 0},
  };
  std::mt19937 rng(7);
  for (const AttentionCase& c : cases) {
    // Three sequences: a prefill that crosses partitions, a decode deep in
    // context, and a chunk in the middle of a prompt.
    const std::vector<std::pair<int, int>> seqs = {{300, 300}, {520, 1}, {270, 20}};
    const int per_seq = (520 + c.block_size - 1) / c.block_size;
    Cache cache(c.kv_type, 3 * per_seq, c.kv_heads, c.block_size, c.head_dim, c.head_dim, rng);
    Batch b(seqs, shuffled_blocks(3, per_seq, rng), c.block_size);
    const std::int64_t T = b.meta.num_tokens;
    auto q = random_floats(static_cast<std::size_t>(T * c.heads * c.head_dim), rng);
    Tensor qt(q.data(), DType::F32, {T, c.heads, c.head_dim});
    AttentionParams params{1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window, c.softcap};
    std::vector<float> want(q.size()), got(q.size());
    Tensor wt(want.data(), DType::F32, {T, c.heads, c.head_dim}), gt(got.data(), DType::F32, {T, c.heads, c.head_dim});
    ReferenceBackend().attention(qt, cache.kv, b.meta, params, wt);
    CpuBackend(2).attention(qt, cache.kv, b.meta, params, gt);
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, double(std::fabs(want[i] - got[i])));
    EXPECT_LT(worst, 2e-5) << c.kv_type.name() << " heads " << c.heads << "/" << c.kv_heads << " dim " << c.head_dim
                           << " block " << c.block_size << " window " << c.window;
  }
}

// Sliding-window layers never read the blocks that lie wholly before every
// window of the step (issue 9: such blocks are "released or never read";
// they stay allocated because a model's global layers still need them): the
// rows of those blocks are NaN, and the output is the same bits as with
// their real values.
TEST(CpuOps, SlidingWindowAttentionNeverReadsBlocksBeforeTheWindow) {
  std::mt19937 rng(11);
  const int heads = 8, kv_heads = 2, hd = 64, bs = 16;
  for (std::int64_t window : {37, 300}) {
    // A decode deep in context and a prefill chunk in the middle of a prompt.
    const std::vector<std::pair<int, int>> seqs = {{520, 1}, {400, 8}};
    const int per_seq = (520 + bs - 1) / bs;
    Cache cache(DType::F16, 2 * per_seq, kv_heads, bs, hd, hd, rng);
    const auto blocks = shuffled_blocks(2, per_seq, rng);
    Batch b(seqs, blocks, bs);
    const std::int64_t T = b.meta.num_tokens;
    auto q = random_floats(static_cast<std::size_t>(T * heads * hd), rng);
    Tensor qt(q.data(), DType::F32, {T, heads, hd});
    AttentionParams params{0.125f, window, 0.0f};
    std::vector<float> want(q.size()), got(q.size());
    Tensor wt(want.data(), DType::F32, {T, heads, hd}), gt(got.data(), DType::F32, {T, heads, hd});
    CpuBackend cpu(2);
    cpu.attention(qt, cache.kv, b.meta, params, wt);
    // Poison every block that ends before the earliest window start of its
    // sequence's queries in this step.
    int poisoned = 0;
    for (std::size_t s = 0; s < seqs.size(); ++s) {
      const auto [len, fed] = seqs[s];
      const std::int64_t first_window = std::max<std::int64_t>(0, len - fed - window + 1);
      for (std::int64_t blk = 0; (blk + 1) * bs <= first_window; ++blk, ++poisoned)
        for (std::int64_t h = 0; h < kv_heads; ++h)
          for (std::int64_t r = 0; r < bs; ++r) {
            const std::int64_t row = (blocks[s][static_cast<std::size_t>(blk)] * kv_heads + h) * bs + r;
            for (const KvPool* p : {&cache.kv.k, &cache.kv.v}) {
              auto* codes = static_cast<std::uint16_t*>(p->row(row));
              std::fill(codes, codes + hd, std::uint16_t{0x7E00});  // f16 NaN
            }
          }
    }
    ASSERT_GT(poisoned, 0) << "window " << window;
    cpu.attention(qt, cache.kv, b.meta, params, gt);
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
          << "window " << window << " element " << i << " (" << poisoned << " blocks poisoned)";
  }
}

// With one visible position a query's output is that position's value row,
// so the kernel's own row decoding shows through: every fp8_e4m3 code and
// every int8 code of q8_0 must decode to the reference's float exactly.
TEST(CpuOps, AttentionDecodesEveryCodeAsTheReference) {
  std::mt19937 rng(13);
  for (KvDType type : {KvDType::kFp8E4M3, KvDType::kQ8_0}) {
    const std::int64_t hd = 64, bs = 16;
    Cache cache(type, 4, 1, bs, hd, hd, rng);
    const std::uint16_t kScales[] = {f32_to_f16(0.37f), f32_to_f16(1.0f), f32_to_f16(3e-6f), f32_to_f16(900.0f)};
    for (int s = 0; s < 4; ++s) {  // row 0 of block s holds codes 64s .. 64s + 63
      const std::int64_t r = cache.kv.row_of(s * bs, 0);
      auto* codes = static_cast<std::uint8_t*>(cache.kv.v.row(r));
      for (int i = 0; i < hd; ++i) codes[i] = static_cast<std::uint8_t>(s * hd + i);
      for (std::int64_t j = 0; j < cache.kv.v.row_scales(); ++j) cache.kv.v.row_scale(r)[j] = kScales[(s + j) % 4];
    }
    Batch b({{1, 1}, {1, 1}, {1, 1}, {1, 1}}, {{0}, {1}, {2}, {3}}, bs);
    auto q = random_floats(static_cast<std::size_t>(4 * hd), rng);
    std::vector<float> got(q.size()), want(q.size());
    Tensor qt(q.data(), DType::F32, {4, 1, hd}), gt(got.data(), DType::F32, {4, 1, hd});
    CpuBackend(2).attention(qt, cache.kv, b.meta, {0.125f, 0, 0}, gt);
    for (int s = 0; s < 4; ++s) {
      const std::int64_t r = cache.kv.row_of(s * bs, 0);
      decode_kv_row(type, cache.kv.v.row(r), cache.kv.v.row_scale(r), hd, want.data() + s * hd);
    }
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << name(type) << " code " << i;
      } else {
        EXPECT_EQ(got[i], want[i]) << name(type) << " code " << i;
      }
    }
  }
}

TEST(CpuOps, AttentionOfAQueryNeverDependsOnTheBatch) {
  std::mt19937 rng(8);
  for (KvCacheDType type : {KvCacheDType(DType::F16), KvCacheDType(DType::F32), KvCacheDType(KvDType::kQ8_0),
                            KvCacheDType(KvDType::kFp8E4M3)}) {
    SCOPED_TRACE(type.name());
    const int heads = 14, kv_heads = 2, hd = 64, bs = 16, len = 530;
    Cache cache(type, 2 * 34, kv_heads, bs, hd, hd, rng);
    auto blocks = shuffled_blocks(2, 34, rng);
    auto q_all = random_floats(static_cast<std::size_t>(len * heads * hd), rng);
    auto run = [&](const std::vector<std::pair<int, int>>& seqs, const std::vector<std::vector<std::int32_t>>& tbl,
                   const float* q, int threads) {
      Batch b(seqs, tbl, bs);
      std::vector<float> out(static_cast<std::size_t>(b.meta.num_tokens * heads * hd));
      Tensor qt(const_cast<float*>(q), DType::F32, {b.meta.num_tokens, heads, hd});
      Tensor ot(out.data(), DType::F32, {b.meta.num_tokens, heads, hd});
      CpuBackend(threads).attention(qt, cache.kv, b.meta, {0.125f, 0, 0}, ot);
      return out;
    };
    const std::size_t row = static_cast<std::size_t>(heads * hd);
    // The whole prompt at once, in chunks of 37 and as single decodes, on 1 and 2 threads.
    const auto whole = run({{len, len}}, {blocks[0]}, q_all.data(), 2);
    for (int threads : {1, 2}) {
      for (int start = 0; start < len; start += 37) {
        const int n = std::min(37, len - start);
        const auto chunk = run({{start + n, n}}, {blocks[0]}, q_all.data() + start * row, threads);
        ASSERT_TRUE(std::equal(chunk.begin(), chunk.end(), whole.begin() + start * row)) << "chunk at " << start;
      }
      for (int p : {0, 15, 16, 255, 256, 257, 529}) {
        // The same query as a decode beside another sequence's prefill.
        std::vector<float> q2(q_all.begin() + p * row, q_all.begin() + (p + 1) * row);
        q2.insert(q2.end(), q_all.begin(), q_all.begin() + 20 * row);
        const auto mixed = run({{p + 1, 1}, {20, 20}}, {blocks[0], blocks[1]}, q2.data(), threads);
        ASSERT_TRUE(std::equal(mixed.begin(), mixed.begin() + row, whole.begin() + p * row)) << "decode at " << p;
      }
    }
  }
}

TEST(CpuOps, RowOpsMatchReference) {
  std::mt19937 rng(9);
  CpuBackend cpu(2);
  ReferenceBackend ref;
  for (std::int64_t cols : {1, 7, 8, 9, 64, 576, 897}) {
    for (std::int64_t rows : {1, 3, 17}) {
      // One float of offset: rows start misaligned.
      auto x = random_floats(static_cast<std::size_t>(rows * cols + 1), rng, 3.0f);
      auto y = random_floats(static_cast<std::size_t>(rows * cols + 1), rng, 3.0f);
      auto w = random_floats(static_cast<std::size_t>(cols), rng);
      Tensor xt(x.data() + 1, DType::F32, {rows, cols}), yt(y.data() + 1, DType::F32, {rows, cols});
      Tensor wt(w.data(), DType::F32, {cols});
      std::vector<float> a(x.size()), b(x.size());
      Tensor at(a.data() + 1, DType::F32, {rows, cols}), bt(b.data() + 1, DType::F32, {rows, cols});

      ref.rms_norm(xt, wt, 1e-5f, at);
      cpu.rms_norm(xt, wt, 1e-5f, bt);
      for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * (1 + std::fabs(a[i]))) << "rms_norm";

      for (GluActivation act : {GluActivation::kSilu, GluActivation::kGeluTanh}) {
        ref.glu(xt, yt, act, at);
        cpu.glu(xt, yt, act, bt);
        for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * (1 + std::fabs(a[i]))) << "glu";
      }
      a = x;
      b = x;
      ref.add(at, yt);
      cpu.add(bt, yt);
      ASSERT_EQ(a, b) << "add";
      ref.scale(at, 0.37f);
      cpu.scale(bt, 0.37f);
      ASSERT_EQ(a, b) << "scale";
    }
  }
}

TEST(CpuOps, RopeMatchesReferenceInBothOrderings) {
  std::mt19937 rng(10);
  for (bool neox : {false, true}) {
    for (int dim : {64, 32}) {
      RopeTable table;
      table.neox = neox;
      table.dim = dim;
      for (int i = 0; i < dim / 2; ++i) table.inv_freq.push_back(static_cast<float>(std::pow(10000.0, -2.0 * i / dim)));
      const std::int64_t T = 13, heads = 3, hd = 64;
      std::vector<std::int32_t> pos(T);
      for (std::int64_t t = 0; t < T; ++t) pos[t] = static_cast<std::int32_t>(t * 97);
      auto x = random_floats(static_cast<std::size_t>(T * heads * hd), rng);
      auto y = x;
      Tensor xt(x.data(), DType::F32, {T, heads, hd}), yt(y.data(), DType::F32, {T, heads, hd});
      Tensor pt(pos.data(), DType::I32, {T});
      ReferenceBackend().rope(xt, pt, table);
      CpuBackend(2).rope(yt, pt, table);
      EXPECT_EQ(x, y) << (neox ? "neox" : "normal") << " dim " << dim;
    }
  }
}

TEST(CpuOps, WriteKvMatchesReferenceForEveryCacheType) {
  std::mt19937 rng(11);
  for (KvDType type : {KvDType::kF32, KvDType::kF16, KvDType::kBF16, KvDType::kQ8_0, KvDType::kFp8E4M3}) {
    for (std::int64_t hd : {64, 12, 9, 96}) {
      if (kv_dim_problem(type, hd)) continue;  // q8_0 needs whole blocks of 32
      Cache a(type, 4, 2, 16, hd, hd, rng), b(type, 4, 2, 16, hd, hd, rng);
      b.k_codes = a.k_codes;
      b.v_codes = a.v_codes;
      b.k_scales = a.k_scales;
      b.v_scales = a.v_scales;
      const std::int64_t T = 5;
      auto k = random_floats(static_cast<std::size_t>(T * 2 * hd), rng, 4.0f);
      auto v = random_floats(static_cast<std::size_t>(T * 2 * hd), rng, 4.0f);
      std::vector<std::int32_t> slots = {0, 17, -1, 63, 31};
      Tensor kt(k.data(), DType::F32, {T, 2, hd}), vt(v.data(), DType::F32, {T, 2, hd});
      Tensor st(slots.data(), DType::I32, {T});
      ReferenceBackend().write_kv(kt, vt, st, a.kv);
      CpuBackend(2).write_kv(kt, vt, st, b.kv);
      EXPECT_EQ(a.k_codes, b.k_codes) << name(type) << " head_dim " << hd;
      EXPECT_EQ(a.v_codes, b.v_codes) << name(type) << " head_dim " << hd;
      EXPECT_EQ(a.k_scales, b.k_scales) << name(type) << " head_dim " << hd;
      EXPECT_EQ(a.v_scales, b.v_scales) << name(type) << " head_dim " << hd;
      // What was written reads back as the row's own encoding: token 3 of
      // slot 63 (block 3, offset 15), KV head 1.
      std::vector<float> got(static_cast<std::size_t>(hd)), want(static_cast<std::size_t>(hd));
      const std::int64_t r = a.kv.row_of(63, 1);
      decode_kv_row(type, a.kv.k.row(r), a.kv.k.row_scale(r), hd, got.data());
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(kv_row_bytes(type, hd)));
      std::vector<std::uint16_t> scales(static_cast<std::size_t>(kv_row_scales(type, hd)) + 1);
      encode_kv_row(type, k.data() + (3 * 2 + 1) * hd, hd, codes.data(), scales.data());
      decode_kv_row(type, codes.data(), scales.data(), hd, want.data());
      EXPECT_EQ(got, want) << name(type) << " head_dim " << hd;
    }
  }
}

TEST(CpuOps, CopyBlocksMovesCodesAndScales) {
  std::mt19937 rng(12);
  for (KvDType type : {KvDType::kF16, KvDType::kQ8_0, KvDType::kFp8E4M3}) {
    Cache c(type, 4, 2, 16, 64, 64, rng);
    CpuBackend(2).copy_blocks(c.kv, {{1, 3}});
    for (const KvPool* p : {&c.kv.k, &c.kv.v}) {
      for (std::int64_t r = 0; r < 2 * 16; ++r) {
        std::vector<float> src(64), dst(64);
        decode_kv_row(type, p->row(1 * 32 + r), p->row_scale(1 * 32 + r), 64, src.data());
        decode_kv_row(type, p->row(3 * 32 + r), p->row_scale(3 * 32 + r), 64, dst.data());
        EXPECT_EQ(src, dst) << name(type) << " row " << r;
      }
    }
  }
}

// The mixture-of-experts ops, one row per case: tokens, experts, k, the
// experts' weight type and their [out, in]. Routing, grouping and combining
// are exact (the CPU runs the reference's arithmetic); expert_matmul is the
// CPU matmul per expert, so it is held to the matmul's tolerance against the
// reference and to ==, row by row, against that matmul on one row alone.
struct MoeCase {
  std::int64_t tokens, experts, k;
  DType type;
  std::int64_t out, in;
};

TEST(CpuOps, MoeOpsMatchReference) {
  const MoeCase cases[] = {
      {1, 4, 2, DType::F32, 16, 32},   {5, 8, 2, DType::F16, 24, 64},  {13, 8, 3, DType::Q8_0, 40, 96},
      {9, 16, 4, DType::Q4_0, 33, 64}, {7, 4, 4, DType::Q4_K, 8, 256}, {3, 64, 8, DType::BF16, 17, 32},
      {0, 4, 1, DType::F32, 8, 8},
  };
  std::mt19937 rng(11);
  for (const MoeCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.tokens << " tokens, " << c.experts << " experts, top " << c.k << ", "
                                      << name(c.type) << " [" << c.out << ", " << c.in << "]");
    CpuBackend cpu(3, {}, MatmulPrecision::kF32);
    ReferenceBackend ref;
    const std::int64_t T = c.tokens, E = c.experts, k = c.k, N = T * k;

    // Routing: the same ids and weights, normalised or not.
    auto logits = random_floats(static_cast<std::size_t>(T * E), rng, 2.0f);
    Tensor logits_t(logits.data(), DType::F32, {T, E});
    std::vector<std::int32_t> ids_a(N), ids_b(N);
    std::vector<float> w_a(N), w_b(N);
    Tensor ids_at(ids_a.data(), DType::I32, {T, k}), ids_bt(ids_b.data(), DType::I32, {T, k});
    Tensor w_at(w_a.data(), DType::F32, {T, k}), w_bt(w_b.data(), DType::F32, {T, k});
    for (bool normalize : {false, true}) {
      ref.moe_route(logits_t, normalize, ids_at, w_at);
      cpu.moe_route(logits_t, normalize, ids_bt, w_bt);
      ASSERT_EQ(ids_a, ids_b);
      ASSERT_EQ(w_a, w_b);
    }
    for (std::int64_t t = 0; t < T; ++t) {
      float sum = 0;
      for (std::int64_t r = 0; r < k; ++r) {
        sum += w_a[t * k + r];
        if (r > 0) {
          EXPECT_GE(w_a[t * k + r - 1], w_a[t * k + r]) << "best first";
        }
      }
      EXPECT_NEAR(sum, 1.0f, 1e-5f);
      // The k chosen are the k largest logits.
      std::vector<float> sorted(logits.begin() + t * E, logits.begin() + (t + 1) * E);
      std::sort(sorted.rbegin(), sorted.rend());
      for (std::int64_t r = 0; r < k; ++r) EXPECT_EQ(logits[t * E + ids_a[t * k + r]], sorted[r]);
    }

    // Grouping: the same on both, and a permutation consistent with ids.
    std::vector<std::int32_t> off_a(E + 1), off_b(E + 1), tok_a(N), tok_b(N), rows_a(N), rows_b(N);
    Tensor off_at(off_a.data(), DType::I32, {E + 1}), off_bt(off_b.data(), DType::I32, {E + 1});
    Tensor tok_at(tok_a.data(), DType::I32, {N}), tok_bt(tok_b.data(), DType::I32, {N});
    Tensor rows_at(rows_a.data(), DType::I32, {T, k}), rows_bt(rows_b.data(), DType::I32, {T, k});
    ref.moe_group(ids_at, off_at, tok_at, rows_at);
    cpu.moe_group(ids_at, off_bt, tok_bt, rows_bt);
    ASSERT_EQ(off_a, off_b);
    ASSERT_EQ(tok_a, tok_b);
    ASSERT_EQ(rows_a, rows_b);
    ASSERT_EQ(off_a[0], 0);
    ASSERT_EQ(off_a[E], N);
    for (std::int64_t a = 0; a < N; ++a) {
      const std::int32_t row = rows_a[a], e = ids_a[a];
      EXPECT_TRUE(row >= off_a[e] && row < off_a[e + 1]) << "assignment " << a << " outside its expert's rows";
      EXPECT_EQ(tok_a[row], a / k);
    }

    // expert_matmul: a stacked [E, out, in] weight of the case's type.
    const std::int64_t bytes_per_expert = row_bytes(c.type, c.in) * c.out;
    std::vector<std::uint8_t> w_bytes(static_cast<std::size_t>(E * bytes_per_expert));
    for (std::int64_t r = 0; r < E * c.out; ++r) {
      auto vals = random_floats(static_cast<std::size_t>(c.in), rng, 0.5f);
      quantize_row(c.type, vals.data(), w_bytes.data() + r * row_bytes(c.type, c.in), c.in);
    }
    Tensor w_ref(w_bytes.data(), c.type, {E, c.out, c.in});
    Tensor w_cpu = w_ref;
    Buffer packed = cpu.prepare_weight(w_cpu);
    auto x = random_floats(static_cast<std::size_t>(N * c.in), rng);
    Tensor xt(x.data(), DType::F32, {N, c.in});
    std::vector<float> y_a(N * c.out, -1.0f), y_b(N * c.out, -1.0f);
    Tensor y_at(y_a.data(), DType::F32, {N, c.out}), y_bt(y_b.data(), DType::F32, {N, c.out});
    ref.expert_matmul(w_ref, xt, off_at, y_at);
    cpu.expert_matmul(w_cpu, xt, off_at, y_bt);
    for (std::int64_t e = 0; e < E; ++e) {
      for (std::int64_t j = off_a[e]; j < off_a[e + 1]; ++j) {
        double norm = 0;
        std::vector<float> wrow(static_cast<std::size_t>(c.in));
        for (std::int64_t o = 0; o < c.out; ++o) {
          dequantize_row(c.type, expert_weight(w_ref, e).row(o), wrow.data(), c.in);
          norm = 0;
          for (std::int64_t i = 0; i < c.in; ++i) norm += std::fabs(wrow[i] * x[j * c.in + i]);
          ASSERT_NEAR(y_a[j * c.out + o], y_b[j * c.out + o], 1e-5 * (norm + 1e-3)) << "expert " << e;
        }
        // One row alone through the CPU matmul of its expert: the same bits.
        std::vector<float> alone(static_cast<std::size_t>(c.out));
        Tensor alone_t(alone.data(), DType::F32, {1, c.out});
        cpu.matmul(expert_weight(w_cpu, e), xt.rows_view(j, 1), alone_t, nullptr);
        for (std::int64_t o = 0; o < c.out; ++o) ASSERT_EQ(alone[o], y_b[j * c.out + o]) << "expert " << e;
      }
    }

    // Combining: exact, and the reference's sum in rank order.
    std::vector<float> out_a(T * c.out), out_b(T * c.out);
    Tensor out_at(out_a.data(), DType::F32, {T, c.out}), out_bt(out_b.data(), DType::F32, {T, c.out});
    ref.moe_combine(y_bt, rows_at, w_at, out_at);
    cpu.moe_combine(y_bt, rows_at, w_at, out_bt);
    ASSERT_EQ(out_a, out_b);
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t o = 0; o < c.out; ++o) {
        float want = 0;
        for (std::int64_t r = 0; r < k; ++r) want += w_a[t * k + r] * y_b[rows_a[t * k + r] * c.out + o];
        ASSERT_EQ(out_a[t * c.out + o], want);
      }

    // The shared expert's gate.
    auto gate = random_floats(static_cast<std::size_t>(T), rng, 2.0f);
    Tensor gate_t(gate.data(), DType::F32, {T, 1});
    std::vector<float> sum_a = out_a, sum_b = out_a;
    Tensor sum_at(sum_a.data(), DType::F32, {T, c.out}), sum_bt(sum_b.data(), DType::F32, {T, c.out});
    ref.add_sigmoid_gated(sum_at, out_bt, gate_t);
    cpu.add_sigmoid_gated(sum_bt, out_bt, gate_t);
    ASSERT_EQ(sum_a, sum_b);
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t o = 0; o < c.out; ++o)
        ASSERT_NEAR(sum_a[t * c.out + o], out_a[t * c.out + o] * (1 + 1 / (1 + std::exp(-gate[t]))), 1e-5);
  }
}

TEST(CpuOps, MoeOpsRefuseBadInput) {
  ReferenceBackend ref;
  std::vector<std::int32_t> ids = {0, 5}, off(5), tok(2), rows(2);
  Tensor ids_t(ids.data(), DType::I32, {1, 2}), off_t(off.data(), DType::I32, {5});
  Tensor tok_t(tok.data(), DType::I32, {2}), rows_t(rows.data(), DType::I32, {1, 2});
  EXPECT_THROW(ref.moe_group(ids_t, off_t, tok_t, rows_t),
               Error);  // expert 5 of 4
  std::vector<float> logits(3), w(4);
  std::vector<std::int32_t> four(4);
  Tensor logits_t(logits.data(), DType::F32, {1, 3}), w_t(w.data(), DType::F32, {1, 4});
  Tensor four_t(four.data(), DType::I32, {1, 4});
  EXPECT_THROW(ref.moe_route(logits_t, true, four_t, w_t),
               Error);  // top-4 of 3 experts
  std::vector<float> wm(2 * 4 * 4), x(2 * 4), y(2 * 4);
  std::vector<std::int32_t> bad = {0, 2, 1};  // decreasing
  Tensor wm_t(wm.data(), DType::F32, {2, 4, 4}), x_t(x.data(), DType::F32, {2, 4}), y_t(y.data(), DType::F32, {2, 4});
  Tensor bad_t(bad.data(), DType::I32, {3});
  EXPECT_THROW(ref.expert_matmul(wm_t, x_t, bad_t, y_t), Error);
}

}  // namespace
}  // namespace folio
