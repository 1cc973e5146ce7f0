// The paged-attention ops of every backend against the f32 reference:
// attention over every KV type, GQA layouts, head sizes, block sizes,
// sliding windows, soft-capping and attention sinks; blocks wholly before
// every window never read; every fp8 and int8 code decoded as the reference
// does; a query's output independent of its batch (rule 5), sinks or not;
// write_kv and copy_blocks.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "backend/reference/kv_rows.h"
#include "backend/reference/reference_backend.h"
#include "support/op_suite.h"
#include "tensor/half.h"

namespace folio::testing {
namespace {

class AttentionOps : public OpTest {};

struct AttentionCase {
  KvCacheDType kv_type;
  int heads, kv_heads, head_dim, block_size;
  std::int64_t window;
  float softcap;
};

// Runs attention of q (floats, rounded to the activation type) on the backend
// and on the reference over the host mirror of the same cache.
struct AttentionRun {
  std::vector<float> got, want;
};

// sinks: one logit per head, or empty for none (params.sinks is set here).
AttentionRun run_attention(Backend& be, DType act, DeviceKv& cache, DeviceBatch& batch, const std::vector<float>& q,
                           int heads, int head_dim, AttentionParams params, std::vector<float> sinks = {}) {
  const std::int64_t T = batch.meta.num_tokens, vd = cache.host.value_head_dim();
  AttentionRun r;
  std::vector<float> qr = rounded_to(act, q);
  DeviceTensor qt(be, act, {T, heads, head_dim}), out(be, act, {T, heads, vd}), sinks_d(be, DType::F32, {heads});
  qt.upload_floats(qr);
  if (!sinks.empty()) {
    sinks_d.upload_values(sinks);
    params.sinks = *sinks_d;
  }
  be.attention(*qt, cache.device, batch.meta, params, *out);
  r.got = out.download_floats();
  out.expect_guards_intact("attention");
  // The reference reads the host mirror, with host metadata.
  AttentionMetadata host = batch.meta;
  host.positions = Tensor(batch.positions.data(), DType::I32, {T});
  host.slot_mapping = Tensor(batch.slots.data(), DType::I32, {T});
  host.query_start = Tensor(batch.query_start.data(), DType::I32, {batch.meta.num_seqs + 1});
  host.seq_lens = Tensor(batch.seq_lens.data(), DType::I32, {batch.meta.num_seqs});
  host.block_tables = Tensor(batch.tables.data(), DType::I32, {static_cast<std::int64_t>(batch.tables.size())});
  r.want.resize(static_cast<std::size_t>(T * heads * vd));
  Tensor qh(qr.data(), DType::F32, {T, heads, head_dim}), oh(r.want.data(), DType::F32, {T, heads, vd});
  if (!sinks.empty()) params.sinks = Tensor(sinks.data(), DType::F32, {heads});
  ReferenceBackend().attention(qh, cache.host, host, params, oh);
  return r;
}

TEST_P(AttentionOps, EveryKvTypeAndLayoutAgainstReference) {
  const AttentionCase cases[] = {
      {DType::F32, 9, 3, 64, 16, 0, 0},    {DType::F16, 9, 3, 64, 16, 0, 0},   {DType::BF16, 9, 3, 64, 16, 0, 0},
      {DType::F16, 14, 2, 64, 16, 0, 0},   {DType::F16, 4, 1, 256, 16, 0, 0},  {DType::F32, 8, 8, 80, 32, 0, 0},
      {DType::F16, 6, 2, 12, 1, 0, 0},     {DType::F16, 4, 1, 64, 16, 37, 0},  {DType::F32, 4, 2, 33, 16, 0, 30.0f},
      {DType::F16, 16, 1, 128, 16, 300, 0}, {DType::F16, 14, 2, 128, 32, 0, 0},
      {KvDType::kQ8_0, 9, 3, 64, 16, 0, 0},      {KvDType::kQ8_0, 4, 1, 256, 16, 0, 0},
      {KvDType::kQ8_0, 16, 1, 128, 16, 300, 0},  {KvDType::kQ8_0, 8, 8, 96, 32, 0, 30.0f},
      {KvDType::kFp8E4M3, 9, 3, 64, 16, 0, 0},   {KvDType::kFp8E4M3, 8, 8, 80, 32, 0, 0},
      {KvDType::kFp8E4M3, 6, 2, 12, 1, 0, 0},    {KvDType::kFp8E4M3, 4, 1, 64, 16, 37, 0},
      {{KvDType::kQ8_0, KvDType::kF16}, 14, 2, 64, 16, 0, 0},
      {{KvDType::kF16, KvDType::kFp8E4M3}, 14, 2, 64, 16, 0, 0},
  };
  // With attention sinks: gpt-oss's layout (head size 64, 8 query heads per
  // KV head, full and 128-token sliding layers) and others.
  const AttentionCase sink_cases[] = {
      {DType::F32, 16, 2, 64, 16, 0, 0},   {DType::F16, 16, 2, 64, 16, 128, 0},
      {KvDType::kQ8_0, 8, 1, 64, 16, 128, 0}, {DType::BF16, 6, 2, 12, 1, 0, 30.0f},
  };
  std::vector<std::pair<AttentionCase, bool>> all;  // case, with sinks
  for (const AttentionCase& c : cases) all.emplace_back(c, false);
  for (const AttentionCase& c : sink_cases) all.emplace_back(c, true);
  std::mt19937 rng(7);
  for (const auto& [c, with_sinks] : all) {
    // A prefill, a decode deep in context, a chunk in the middle of a
    // prompt, and a one-token sequence.
    const std::vector<std::pair<int, int>> seqs = {{97, 97}, {1000, 1}, {270, 17}, {1, 1}};
    const int per_seq = (1000 + c.block_size - 1) / c.block_size;
    DeviceKv cache(be(), c.kv_type, 4 * per_seq, c.kv_heads, c.block_size, c.head_dim, c.head_dim, rng);
    DeviceBatch batch(be(), seqs, shuffled_blocks(4, per_seq, rng), c.block_size);
    const auto q = random_floats(static_cast<std::size_t>(batch.meta.num_tokens * c.heads * c.head_dim), rng);
    const AttentionParams params{1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window, c.softcap, {}};
    // Sinks around the scores' size, some far above them (the sink takes
    // nearly all the weight) and some far below (none).
    std::vector<float> sinks;
    if (with_sinks) {
      sinks = random_floats(static_cast<std::size_t>(c.heads), rng, 2.0f);
      sinks[0] = 12.0f;
      if (c.heads > 1) sinks[1] = -30.0f;
    }
    const AttentionRun r = run_attention(be(), act(), cache, batch, q, c.heads, c.head_dim, params, sinks);
    const std::string what = fmt::format("{} heads {}/{} dim {} block {} window {} softcap {}{}", c.kv_type.name(),
                                         c.heads, c.kv_heads, c.head_dim, c.block_size, c.window, c.softcap,
                                         with_sinks ? " sinks" : "");
    // Outputs are averages of unit-sized values: an absolute bound.
    const std::vector<double> scale(r.want.size(), 2.0);
    EXPECT_EQ(compare(r.got, r.want, scale, GetParam().float_ops, GetParam().rounding, what), "");
  }
}

// Blocks that lie wholly before every window of the step are never read:
// their rows are NaN, and the output is the same bits as with their values.
TEST_P(AttentionOps, SlidingWindowNeverReadsBlocksBeforeTheWindow) {
  std::mt19937 rng(11);
  const int heads = 8, kv_heads = 2, hd = 64, bs = 16;
  for (std::int64_t window : {37, 300}) {
    const std::vector<std::pair<int, int>> seqs = {{520, 1}, {400, 8}};
    const int per_seq = (520 + bs - 1) / bs;
    DeviceKv cache(be(), DType::F16, 2 * per_seq, kv_heads, bs, hd, hd, rng);
    const auto blocks = shuffled_blocks(2, per_seq, rng);
    DeviceBatch batch(be(), seqs, blocks, bs);
    const auto q = random_floats(static_cast<std::size_t>(batch.meta.num_tokens * heads * hd), rng);
    const AttentionParams params{0.125f, window, 0.0f, {}};
    const std::vector<float> before = run_attention(be(), act(), cache, batch, q, heads, hd, params).got;
    int poisoned = 0;
    for (std::size_t s = 0; s < seqs.size(); ++s) {
      const auto [len, fed] = seqs[s];
      const std::int64_t first_window = std::max<std::int64_t>(0, len - fed - window + 1);
      for (std::int64_t blk = 0; (blk + 1) * bs <= first_window; ++blk, ++poisoned)
        for (std::int64_t h = 0; h < kv_heads; ++h)
          for (std::int64_t r = 0; r < bs; ++r) {
            const std::int64_t row = (blocks[s][static_cast<std::size_t>(blk)] * kv_heads + h) * bs + r;
            for (const KvPool* p : {&cache.host.k, &cache.host.v}) {
              auto* codes = static_cast<std::uint16_t*>(kv_rows::codes(*p, row));
              std::fill(codes, codes + hd, std::uint16_t{0x7E00});  // f16 NaN
            }
          }
    }
    ASSERT_GT(poisoned, 0) << "window " << window;
    cache.upload();
    const std::vector<float> after = run_attention(be(), act(), cache, batch, q, heads, hd, params).got;
    ASSERT_EQ(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)), 0)
        << "window " << window << " (" << poisoned << " blocks poisoned)";
  }
}

// With one visible position a query's output is that position's value row,
// so the kernel's own row decoding shows through: every fp8_e4m3 code and
// every int8 code of q8_0 must decode to the reference's float exactly (as
// the activation type holds it).
TEST_P(AttentionOps, EveryCodeDecodesAsTheReference) {
  std::mt19937 rng(13);
  for (KvDType type : {KvDType::kFp8E4M3, KvDType::kQ8_0}) {
    const std::int64_t hd = 64, bs = 16;
    DeviceKv cache(be(), type, 4, 1, bs, hd, hd, rng);
    const std::uint16_t kScales[] = {f32_to_f16(0.37f), f32_to_f16(1.0f), f32_to_f16(3e-6f), f32_to_f16(900.0f)};
    std::vector<float> want;
    for (int s = 0; s < 4; ++s) {  // row 0 of block s holds codes 64s .. 64s + 63
      const std::int64_t r = cache.host.row_of(s * bs, 0);
      auto* codes = static_cast<std::uint8_t*>(kv_rows::codes(cache.host.v, r));
      for (int i = 0; i < hd; ++i) codes[i] = static_cast<std::uint8_t>(s * hd + i);
      for (std::int64_t j = 0; j < cache.host.v.row_scales(); ++j) kv_rows::scales(cache.host.v, r)[j] = kScales[(s + j) % 4];
      std::vector<float> row(static_cast<std::size_t>(hd));
      decode_kv_row(type, codes, kv_rows::scales(cache.host.v, r), hd, row.data());
      want.insert(want.end(), row.begin(), row.end());
    }
    cache.upload();
    DeviceBatch batch(be(), {{1, 1}, {1, 1}, {1, 1}, {1, 1}}, {{0}, {1}, {2}, {3}}, bs);
    const auto q = random_floats(static_cast<std::size_t>(4 * hd), rng);
    const std::vector<float> got = run_attention(be(), act(), cache, batch, q, 1, static_cast<int>(hd), {0.125f, 0, 0, {}}).got;
    EXPECT_EQ(compare(got, rounded_to(act(), want), {}, 0, 0, std::string(name(type))), "");
  }
}

// Rule 5: the whole prompt at once, in chunks of 37 and as single decodes
// beside another sequence's prefill: every query's output is the same bits.
TEST_P(AttentionOps, AQueryNeverDependsOnItsBatch) {
  std::mt19937 rng(8);
  for (KvCacheDType type : {KvCacheDType(DType::F16), KvCacheDType(KvDType::kQ8_0), KvCacheDType(KvDType::kFp8E4M3),
                            KvCacheDType(DType::BF16)}) {
    // bf16 runs with sinks (gpt-oss) and a 40-token window.
    const bool with_sinks = type.k == KvDType::kBF16;
    SCOPED_TRACE(type.name());
    const int heads = 14, kv_heads = 2, hd = 64, bs = 16, len = 160;
    DeviceKv cache(be(), type, 2 * 10, kv_heads, bs, hd, hd, rng);
    const auto blocks = shuffled_blocks(2, 10, rng);
    const auto q_all = random_floats(static_cast<std::size_t>(len * heads * hd), rng);
    const std::size_t row = static_cast<std::size_t>(heads * hd);
    const std::vector<float> sinks = with_sinks ? random_floats(static_cast<std::size_t>(heads), rng, 2.0f) : std::vector<float>();
    auto run = [&](const std::vector<std::pair<int, int>>& seqs, const std::vector<std::vector<std::int32_t>>& tbl,
                   std::vector<float> q) {
      DeviceBatch batch(be(), seqs, tbl, bs);
      return run_attention(be(), act(), cache, batch, q, heads, hd, {0.125f, with_sinks ? 40 : 0, 0, {}}, sinks).got;
    };
    const auto whole = run({{len, len}}, {blocks[0]}, q_all);
    for (int start = 0; start < len; start += 37) {
      const int n = std::min(37, len - start);
      const auto chunk = run({{start + n, n}}, {blocks[0]},
                             std::vector<float>(q_all.begin() + start * row, q_all.begin() + (start + n) * row));
      ASSERT_EQ(std::memcmp(chunk.data(), whole.data() + start * row, chunk.size() * sizeof(float)), 0)
          << "chunk at " << start;
    }
    for (int p : {0, 15, 16, 97, 159}) {
      std::vector<float> q2(q_all.begin() + p * row, q_all.begin() + (p + 1) * row);
      q2.insert(q2.end(), q_all.begin(), q_all.begin() + 20 * row);
      const auto mixed = run({{p + 1, 1}, {20, 20}}, {blocks[0], blocks[1]}, q2);
      ASSERT_EQ(std::memcmp(mixed.data(), whole.data() + p * row, row * sizeof(float)), 0) << "decode at " << p;
    }
  }
}

TEST_P(AttentionOps, WriteKvMatchesReferenceForEveryCacheType) {
  std::mt19937 rng(11);
  for (KvDType type : {KvDType::kF32, KvDType::kF16, KvDType::kBF16, KvDType::kQ8_0, KvDType::kFp8E4M3}) {
    for (std::int64_t hd : {64, 12, 9, 96, 256}) {
      if (kv_dim_problem(type, hd)) continue;  // q8_0 needs whole blocks of 32
      DeviceKv cache(be(), type, 4, 2, 16, hd, hd, rng);
      const std::int64_t T = 5;
      const auto k = rounded_to(act(), random_floats(static_cast<std::size_t>(T * 2 * hd), rng, 4.0f));
      const auto v = rounded_to(act(), random_floats(static_cast<std::size_t>(T * 2 * hd), rng, 4.0f));
      std::vector<std::int32_t> slots = {0, 17, -1, 63, 31};
      DeviceTensor kt(be(), act(), {T, 2, hd}), vt(be(), act(), {T, 2, hd}), st(be(), DType::I32, {T});
      kt.upload_floats(k);
      vt.upload_floats(v);
      st.upload_values(slots);
      be().write_kv(*kt, *vt, *st, cache.device);
      // The reference writes the host mirror.
      Tensor kh(const_cast<float*>(k.data()), DType::F32, {T, 2, hd}), vh(const_cast<float*>(v.data()), DType::F32, {T, 2, hd});
      Tensor sh(slots.data(), DType::I32, {T});
      ReferenceBackend().write_kv(kh, vh, sh, cache.host);
      const std::vector<std::uint8_t> want = cache.host_bytes;
      cache.download();
      EXPECT_EQ(cache.host_bytes, want) << name(type) << " head_dim " << hd;
    }
  }
}

TEST_P(AttentionOps, CopyBlocksMovesCodesAndScalesInOrder) {
  std::mt19937 rng(12);
  for (KvDType type : {KvDType::kF16, KvDType::kQ8_0, KvDType::kFp8E4M3}) {
    DeviceKv cache(be(), type, 4, 2, 16, 64, 64, rng);
    // 1 -> 3, then 3 -> 0: block 0 ends as block 1 was.
    const std::pair<std::int32_t, std::int32_t> pairs[] = {{1, 3}, {3, 0}};
    be().copy_blocks(cache.device, pairs);
    ReferenceBackend().copy_blocks(cache.host, pairs);
    const std::vector<std::uint8_t> want = cache.host_bytes;
    cache.download();
    EXPECT_EQ(cache.host_bytes, want) << name(type);
  }
}

FOLIO_OP_SUITE(AttentionOps);

}  // namespace
}  // namespace folio::testing
