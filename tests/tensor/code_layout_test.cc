// The probed code layouts: every type folio writes has one, of the code width
// its format defines; reading and writing an element's code touches that
// element alone; and block_levels lists exactly what each code decodes to.
#include "tensor/code_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/quantize.h"

namespace folio {
namespace {

struct Expected {
  DType type;
  int bits_per_code;  // from the format's definition
};

constexpr Expected kTypes[] = {
    {DType::Q4_0, 4}, {DType::Q4_1, 4}, {DType::Q5_0, 5},   {DType::Q5_1, 5},   {DType::Q8_0, 8},
    {DType::Q2_K, 2}, {DType::Q3_K, 3}, {DType::Q4_K, 4},   {DType::Q5_K, 5},   {DType::Q6_K, 6},
    {DType::Q8_K, 8}, {DType::IQ4_NL, 4}, {DType::IQ4_XS, 4}, {DType::MXFP4, 4}, {DType::NVFP4, 4},
};

class CodeLayoutTest : public ::testing::TestWithParam<Expected> {
 protected:
  // A block of random normal numbers, encoded.
  std::vector<std::uint8_t> random_block(unsigned seed) const {
    const DType type = GetParam().type;
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(info(type).block_elems));
    for (float& v : x) v = normal(rng);
    std::vector<std::uint8_t> block(static_cast<std::size_t>(info(type).block_bytes));
    quantize_row(type, x.data(), block.data(), static_cast<std::int64_t>(x.size()));
    return block;
  }
  std::vector<float> decode(const std::vector<std::uint8_t>& block) const {
    const DType type = GetParam().type;
    std::vector<float> y(static_cast<std::size_t>(info(type).block_elems));
    dequantize_row(type, block.data(), y.data(), static_cast<std::int64_t>(y.size()));
    return y;
  }
};

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

TEST_P(CodeLayoutTest, HasTheFormatsCodeWidth) {
  const CodeLayout* l = code_layout(GetParam().type);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->bits_per_code, GetParam().bits_per_code);
  EXPECT_EQ(l->block_elems, info(GetParam().type).block_elems);
  ASSERT_EQ(l->bits.size(), static_cast<std::size_t>(l->block_elems * l->bits_per_code));
  std::vector<bool> used(static_cast<std::size_t>(8 * info(GetParam().type).block_bytes), false);
  for (std::uint16_t b : l->bits) {
    ASSERT_LT(b, used.size());
    EXPECT_FALSE(used[b]) << "bit " << b << " belongs to two elements";
    used[b] = true;
  }
}

TEST_P(CodeLayoutTest, SettingACodeChangesOnlyItsElement) {
  const CodeLayout& l = *code_layout(GetParam().type);
  std::mt19937 rng(7);
  for (unsigned seed = 0; seed < 4; ++seed) {
    std::vector<std::uint8_t> block = random_block(seed);
    const std::vector<std::uint8_t> original = block;
    const std::vector<float> before = decode(block);
    for (int trial = 0; trial < 32; ++trial) {
      const int e = static_cast<int>(rng() % static_cast<unsigned>(l.block_elems));
      const std::uint32_t old_code = l.code(block.data(), e);
      const auto code = static_cast<std::uint32_t>(rng() % static_cast<unsigned>(l.num_codes()));
      l.set_code(block.data(), e, code);
      EXPECT_EQ(l.code(block.data(), e), code);
      const std::vector<float> after = decode(block);
      for (int k = 0; k < l.block_elems; ++k)
        if (k != e) {
          ASSERT_TRUE(same_bits(before[k], after[k])) << "element " << k << " moved with " << e;
        }
      l.set_code(block.data(), e, old_code);
      ASSERT_EQ(block, original);
    }
  }
}

TEST_P(CodeLayoutTest, LevelsAreWhatEachCodeDecodesTo) {
  const CodeLayout& l = *code_layout(GetParam().type);
  const std::size_t n = static_cast<std::size_t>(l.block_elems);
  std::vector<std::uint8_t> block = random_block(11);
  const std::vector<float> decoded = decode(block);
  std::vector<float> levels(static_cast<std::size_t>(l.num_codes()) * n);
  block_levels(l, block.data(), levels.data());
  for (std::size_t e = 0; e < n; ++e) {
    const std::uint32_t own = l.code(block.data(), static_cast<int>(e));
    ASSERT_TRUE(same_bits(levels[own * n + e], decoded[e])) << "element " << e;
    // Every code means something of its own (FP4's -0 aside, which is +0).
    std::vector<float> values;
    for (int c = 0; c < l.num_codes(); ++c) values.push_back(levels[static_cast<std::size_t>(c) * n + e]);
    std::sort(values.begin(), values.end());
    const auto distinct = std::unique(values.begin(), values.end()) - values.begin();
    EXPECT_GE(distinct, l.num_codes() - 1) << "element " << e;
  }
  std::mt19937 rng(3);
  for (int trial = 0; trial < 64; ++trial) {
    const int e = static_cast<int>(rng() % n);
    const auto code = static_cast<std::uint32_t>(rng() % static_cast<unsigned>(l.num_codes()));
    std::vector<std::uint8_t> changed = block;
    l.set_code(changed.data(), e, code);
    EXPECT_TRUE(same_bits(decode(changed)[static_cast<std::size_t>(e)], levels[code * n + static_cast<std::size_t>(e)]));
  }
}

INSTANTIATE_TEST_SUITE_P(AllWrittenTypes, CodeLayoutTest, ::testing::ValuesIn(kTypes),
                         [](const auto& p) { return std::string(name(p.param.type)); });

TEST(CodeLayout, FloatTypesHaveNone) {
  EXPECT_EQ(code_layout(DType::F32), nullptr);
  EXPECT_EQ(code_layout(DType::F16), nullptr);
  EXPECT_EQ(code_layout(DType::BF16), nullptr);
}

}  // namespace
}  // namespace folio
