#include "tensor/code_layout.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

// A layout and, for block_levels, the bytes of a block whose every element
// has code c (uniform[c]) and the mask of all code bits.
struct ProbedLayout {
  CodeLayout layout;
  std::vector<std::uint8_t> code_mask;
  std::vector<std::vector<std::uint8_t>> uniform;
};

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// A block of roughly normal numbers (the sum of four uniforms) times scale.
std::vector<std::uint8_t> probe_block(DType type, std::uint32_t seed, float scale) {
  std::vector<float> x(static_cast<std::size_t>(info(type).block_elems));
  std::uint32_t state = seed;
  for (float& v : x) {
    float s = 0.0f;
    for (int k = 0; k < 4; ++k) {
      state = state * 1664525u + 1013904223u;
      s += static_cast<float>(state >> 8) * (1.0f / 16777216.0f);
    }
    v = scale * (s - 2.0f);
  }
  std::vector<std::uint8_t> block(static_cast<std::size_t>(info(type).block_bytes));
  quantize_row(type, x.data(), block.data(), static_cast<std::int64_t>(x.size()));
  return block;
}

std::unique_ptr<ProbedLayout> probe(DType type) {
  const int n = static_cast<int>(info(type).block_elems);
  const int bytes = static_cast<int>(info(type).block_bytes);
  // Each bit is flipped in several random blocks: a code bit moves its one
  // element or, where two codes decode alike (FP4's +0 and -0), nothing; a
  // scale bit moves many in some block.
  constexpr int kUnseen = -1, kScale = -2;
  std::vector<int> owner(static_cast<std::size_t>(8 * bytes), kUnseen);
  std::vector<float> base(static_cast<std::size_t>(n)), flipped_values(base.size());
  for (std::uint32_t seed = 1; seed <= 8; ++seed) {
    const std::vector<std::uint8_t> block = probe_block(type, 0x9E3779B9u * seed, 0.25f * static_cast<float>(seed));
    dequantize_row(type, block.data(), base.data(), n);
    for (int b = 0; b < 8 * bytes; ++b) {
      int& o = owner[static_cast<std::size_t>(b)];
      if (o == kScale) continue;
      std::vector<std::uint8_t> flipped = block;
      flipped[static_cast<std::size_t>(b / 8)] ^= static_cast<std::uint8_t>(1u << (b % 8));
      dequantize_row(type, flipped.data(), flipped_values.data(), n);
      int changed = kUnseen, num_changed = 0;
      for (int e = 0; e < n; ++e)
        if (!same_bits(base[static_cast<std::size_t>(e)], flipped_values[static_cast<std::size_t>(e)])) {
          changed = e;
          ++num_changed;
        }
      if (num_changed > 1 || (num_changed == 1 && o != kUnseen && o != changed))
        o = kScale;
      else if (num_changed == 1)
        o = changed;
    }
  }
  std::vector<std::vector<std::uint16_t>> bits_of(static_cast<std::size_t>(n));
  for (int b = 0; b < 8 * bytes; ++b)
    if (owner[static_cast<std::size_t>(b)] >= 0)
      bits_of[static_cast<std::size_t>(owner[static_cast<std::size_t>(b)])].push_back(static_cast<std::uint16_t>(b));

  auto p = std::make_unique<ProbedLayout>();
  CodeLayout& l = p->layout;
  l.type = type;
  l.block_elems = n;
  l.bits_per_code = static_cast<int>(bits_of[0].size());
  FOLIO_CHECK(l.bits_per_code >= 1 && l.bits_per_code <= 8);
  p->code_mask.assign(static_cast<std::size_t>(bytes), 0);
  for (const auto& element_bits : bits_of) {
    FOLIO_CHECK(static_cast<int>(element_bits.size()) == l.bits_per_code);  // every element alike
    for (std::uint16_t b : element_bits) {
      l.bits.push_back(b);
      p->code_mask[b / 8u] |= static_cast<std::uint8_t>(1u << (b % 8u));
    }
  }
  p->uniform.assign(static_cast<std::size_t>(l.num_codes()), std::vector<std::uint8_t>(static_cast<std::size_t>(bytes), 0));
  for (int c = 0; c < l.num_codes(); ++c)
    for (int e = 0; e < n; ++e) l.set_code(p->uniform[static_cast<std::size_t>(c)].data(), e, static_cast<std::uint32_t>(c));
  return p;
}

const ProbedLayout* probed(DType type) {
  static std::mutex mutex;
  static std::map<DType, std::unique_ptr<ProbedLayout>> layouts;
  if (is_float(type) || !can_quantize(type)) return nullptr;
  std::lock_guard lock(mutex);
  std::unique_ptr<ProbedLayout>& p = layouts[type];
  if (!p) p = probe(type);
  return p.get();
}

}  // namespace

std::uint32_t CodeLayout::code(const std::uint8_t* block, int e) const {
  std::uint32_t c = 0;
  for (int k = 0; k < bits_per_code; ++k) {
    const std::uint16_t b = bits[static_cast<std::size_t>(e * bits_per_code + k)];
    c |= static_cast<std::uint32_t>((block[b / 8u] >> (b % 8u)) & 1u) << k;
  }
  return c;
}

void CodeLayout::set_code(std::uint8_t* block, int e, std::uint32_t code) const {
  for (int k = 0; k < bits_per_code; ++k) {
    const std::uint16_t b = bits[static_cast<std::size_t>(e * bits_per_code + k)];
    const auto bit = static_cast<std::uint8_t>(1u << (b % 8u));
    if ((code >> k) & 1u)
      block[b / 8u] |= bit;
    else
      block[b / 8u] &= static_cast<std::uint8_t>(~bit);
  }
}

const CodeLayout* code_layout(DType type) {
  const ProbedLayout* p = probed(type);
  return p == nullptr ? nullptr : &p->layout;
}

void block_levels(const CodeLayout& layout, const std::uint8_t* block, float* levels) {
  const ProbedLayout* p = probed(layout.type);
  FOLIO_CHECK(p != nullptr && &p->layout == &layout);
  const std::size_t bytes = p->code_mask.size();
  std::vector<std::uint8_t> uniform(bytes);
  for (int c = 0; c < layout.num_codes(); ++c) {
    const std::vector<std::uint8_t>& codes = p->uniform[static_cast<std::size_t>(c)];
    for (std::size_t i = 0; i < bytes; ++i)
      uniform[i] = static_cast<std::uint8_t>((block[i] & ~p->code_mask[i]) | codes[i]);
    dequantize_row(layout.type, uniform.data(), levels + static_cast<std::size_t>(c) * static_cast<std::size_t>(layout.block_elems),
                   layout.block_elems);
  }
}

}  // namespace folio
