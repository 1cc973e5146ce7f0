#include "support/op_suite.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "backend/cpu/cpu_features.h"
#include "tensor/half.h"
#include "tensor/quantize.h"

namespace folio::testing {
namespace {

constexpr std::size_t kGuard = 64;
constexpr std::uint8_t kGuardByte = 0xA5;

}  // namespace

std::vector<BackendUnderTest> test_backends() {
  std::vector<BackendUnderTest> out;
  BackendUnderTest ref;
  ref.label = "reference";
  ref.options.name = "reference";
  ref.float_ops = 0;
  out.push_back(ref);
  // f16 and bf16 activations: the same f32 loops, rounded where each op
  // stores (round to nearest: half a unit in the last place, relative).
  for (DType act : {DType::F16, DType::BF16}) {
    BackendUnderTest r = ref;
    r.label = act == DType::F16 ? "reference_f16" : "reference_bf16";
    r.options.activations = act;
    r.rounding = act == DType::F16 ? 0x1p-11 : 0x1p-8;
    out.push_back(r);
  }
  // The CPU backend at each SIMD level this machine has (scalar is the
  // reference's code), both matmul precisions.
  std::set<std::string> levels;
  for (const char* cap : {"scalar", "avx2", "avx512", ""}) {
    const std::string level = CpuFeatures::detect(cap).level();
    if (!levels.insert(level).second) continue;
    for (const char* precision : {"q8", "f32"}) {
      BackendUnderTest c;
      c.label = fmt::format("cpu_{}_{}", level, precision);
      std::replace(c.label.begin(), c.label.end(), '-', '_');
      c.options.name = "cpu";
      c.options.num_threads = 2;
      c.options.cpu_level = cap;
      c.options.precision = precision;
      c.q8_activations = std::string(precision) == "q8" && level != "scalar";
      c.matmul_only = std::string(precision) == "f32";
      out.push_back(c);
    }
  }
  BackendUnderTest sealed;
  sealed.label = "sealed";
  sealed.options.name = "sealed";
  sealed.options.num_threads = 2;
  sealed.q8_activations = CpuFeatures::detect().avx2;
  out.push_back(sealed);
  // The GPU, where there is one (its absence is one skipped test,
  // CudaBackend.IsUsableHere). Its transcendental functions are CUDA's, not
  // glibc's, so rope, gates and routing weights are within float_ops of the
  // reference rather than its bits; decoding, KV writes, gathers, combining
  // and sampling stay exact.
  if (backend_unavailable("cuda").empty()) {
    BackendUnderTest cuda;
    cuda.label = "cuda";
    cuda.options.name = "cuda";
    cuda.exact_elementwise = false;
    out.push_back(cuda);
    BackendUnderTest bf16 = cuda;
    bf16.label = "cuda_bf16";
    bf16.options.activations = DType::BF16;
    bf16.rounding = 0x1p-8;
    out.push_back(bf16);
    // cuBLAS for more than 8 rows: f32 products, and bf16 ones whose weights
    // are rounded to bf16 first (half a unit of 2^-8 on each |w x|).
    BackendUnderTest cublas = cuda;
    cublas.label = "cuda_cublas";
    cublas.options.batch_invariant = false;
    cublas.batch_invariant = false;
    cublas.matmul_only = true;
    out.push_back(cublas);
    BackendUnderTest cublas_bf16 = bf16;
    cublas_bf16.label = "cuda_cublas_bf16";
    cublas_bf16.options.batch_invariant = false;
    cublas_bf16.batch_invariant = false;
    cublas_bf16.matmul_only = true;
    cublas_bf16.float_ops = 0x1p-8;
    out.push_back(cublas_bf16);
  }
  return out;
}

std::vector<BackendUnderTest> op_backends() {
  std::vector<BackendUnderTest> out;
  for (BackendUnderTest& b : test_backends())
    if (!b.matmul_only) out.push_back(std::move(b));
  return out;
}

std::string backend_label(const ::testing::TestParamInfo<BackendUnderTest>& info) { return info.param.label; }

void PrintTo(const BackendUnderTest& backend, std::ostream* os) { *os << backend.label; }

DeviceTensor::DeviceTensor(Backend& backend, DType dtype, std::initializer_list<std::int64_t> shape,
                           std::size_t misalign)
    : backend_(backend), offset_(kGuard + misalign) {
  Tensor shaped(nullptr, dtype, shape);
  const std::size_t bytes = shaped.bytes();
  buffer_ = backend.allocate(offset_ + bytes + kGuard);
  tensor_ = buffer_.view(dtype, shape, offset_);
  std::vector<std::uint8_t> fill(buffer_.size(), kGuardByte);
  std::fill(fill.begin() + static_cast<std::ptrdiff_t>(offset_),
            fill.begin() + static_cast<std::ptrdiff_t>(offset_ + bytes), std::uint8_t{0xFF});
  backend.copy_to_device(buffer_.view(DType::I8, {static_cast<std::int64_t>(fill.size())}), fill.data(), fill.size());
}

void DeviceTensor::upload(const void* bytes, std::size_t size) {
  EXPECT_EQ(size, tensor_.bytes());
  backend_.copy_to_device(tensor_, bytes, std::min(size, tensor_.bytes()));
}

void DeviceTensor::upload_floats(const std::vector<float>& values) {
  std::vector<std::uint8_t> bytes(tensor_.bytes());
  ASSERT_EQ(static_cast<std::int64_t>(values.size()), tensor_.numel());
  quantize_row(tensor_.dtype, values.data(), bytes.data(), tensor_.numel());
  upload(bytes.data(), bytes.size());
}

std::vector<std::uint8_t> DeviceTensor::download() const {
  std::vector<std::uint8_t> out(tensor_.bytes());
  backend_.copy_to_host(out.data(), tensor_, out.size());
  return out;
}

std::vector<float> DeviceTensor::download_floats() const {
  const std::vector<std::uint8_t> bytes = download();
  std::vector<float> out(static_cast<std::size_t>(tensor_.numel()));
  dequantize_row(tensor_.dtype, bytes.data(), out.data(), tensor_.numel());
  return out;
}

void DeviceTensor::expect_guards_intact(const std::string& what) const {
  std::vector<std::uint8_t> all(buffer_.size());
  backend_.copy_to_host(all.data(), buffer_.view(DType::I8, {static_cast<std::int64_t>(all.size())}), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i >= offset_ && i < offset_ + tensor_.bytes()) continue;
    if (all[i] != kGuardByte) {
      ADD_FAILURE() << what << ": byte " << static_cast<std::int64_t>(i) - static_cast<std::int64_t>(offset_)
                    << " relative to the output " << tensor_.shape_string() << " was written";
      return;
    }
  }
}

DeviceWeight::DeviceWeight(Backend& backend, const Tensor& host) : tensor(host) {
  storage = backend.load_weight(tensor);
}

std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<float> rounded_to(DType type, std::vector<float> values) {
  if (type == DType::F32) return values;
  std::vector<std::uint8_t> bytes(values.size() * 4);
  quantize_row(type, values.data(), bytes.data(), static_cast<std::int64_t>(values.size()));
  dequantize_row(type, bytes.data(), values.data(), static_cast<std::int64_t>(values.size()));
  return values;
}

namespace {

void put_f16(std::uint8_t* p, float v) {
  const std::uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, sizeof(h));
}

}  // namespace

void fill_weights(DType type, std::int64_t rows, std::int64_t k, std::uint8_t* dst, std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  if (is_float(type)) {
    std::vector<float> x(static_cast<std::size_t>(rows * k));
    for (auto& v : x) v = unit(rng);
    quantize_row(type, x.data(), dst, rows * k);
    return;
  }
  const std::int64_t bytes = row_bytes(type, k) * rows;
  for (std::int64_t i = 0; i < bytes; ++i) dst[i] = static_cast<std::uint8_t>(rng());
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  auto signed_scale = [&] { return (rng() & 1) ? scale(rng) : -scale(rng); };
  const std::int64_t bb = info(type).block_bytes;
  for (std::uint8_t* b = dst; b < dst + bytes; b += bb) {
    switch (type) {
      case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: put_f16(b, signed_scale()); break;
      case DType::Q4_1: case DType::Q5_1: put_f16(b, signed_scale()); put_f16(b + 2, 0.1f * unit(rng)); break;
      case DType::Q2_K: put_f16(b + 80, 0.5f * scale(rng)); put_f16(b + 82, 0.5f * scale(rng)); break;
      case DType::Q3_K: put_f16(b + 108, 0.5f * scale(rng)); break;
      case DType::Q4_K: case DType::Q5_K: put_f16(b, 0.5f * scale(rng)); put_f16(b + 2, 0.5f * scale(rng)); break;
      case DType::Q6_K: put_f16(b + 208, 0.1f * scale(rng)); break;
      // The grid types' values reach 127 (IQ4) or 12 (FP4) times the scale.
      case DType::IQ4_NL: put_f16(b, signed_scale() / 16.0f); break;
      case DType::IQ4_XS: put_f16(b, 0.5f * scale(rng) / 16.0f); break;
      case DType::MXFP4: b[0] = static_cast<std::uint8_t>(118 + rng() % 8); break;  // d from 2^-10 to 2^-3
      case DType::NVFP4:
        for (int g = 0; g < 4; ++g) b[g] = static_cast<std::uint8_t>(0x08 + rng() % 0x28);  // d from 2^-7 to 0.4
        break;
      default: FAIL() << "no generator for " << name(type);
    }
  }
}

const std::vector<DType>& weight_types() {
  static const std::vector<DType> types = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                                           DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL,
                                           DType::IQ4_XS, DType::MXFP4, DType::NVFP4};
  return types;
}

bool is_kquant(DType t) { return info(t).block_elems == 256; }

std::int64_t act_block_elems(DType t) {
  switch (t) {
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: return 256;
    default: return 32;
  }
}

std::vector<std::int64_t> matmul_widths(DType t) {
  if (is_float(t)) return {1, 37, 300};
  switch (info(t).block_elems) {
    case 256: return {256, 768};
    case 64: return {64, 192, 896};
    default: return {32, 96, 896};
  }
}

DeviceKv::DeviceKv(Backend& backend, KvCacheDType type, std::int64_t num_blocks, std::int64_t kv_heads,
                   std::int64_t block_size, std::int64_t head_dim, std::int64_t value_head_dim, std::mt19937& rng)
    : backend_(backend) {
  bytes = kv_pool_bytes(type.k, num_blocks, kv_heads, block_size, head_dim) +
          kv_pool_bytes(type.v, num_blocks, kv_heads, block_size, value_head_dim);
  buffer_ = backend.allocate(bytes);
  host_bytes.assign(bytes, 0);
  // The same layout over both: the host mirror is a view of host_bytes.
  Buffer host_view(host_bytes.data(), bytes, Device::kCpu, nullptr);
  for (auto [buffer, kv] : {std::pair{&buffer_, &device}, std::pair{&host_view, &host}}) {
    std::size_t offset = 0;
    kv->block_size = block_size;
    kv->k = make_kv_pool(*buffer, offset, type.k, num_blocks, kv_heads, block_size, head_dim);
    kv->v = make_kv_pool(*buffer, offset, type.v, num_blocks, kv_heads, block_size, value_head_dim);
  }
  for (const KvPool* p : {&host.k, &host.v}) {
    for (std::int64_t r = 0; r < p->codes.rows(); ++r) {
      auto vals = random_floats(static_cast<std::size_t>(p->dim), rng);
      encode_kv_row(p->type, vals.data(), p->dim, static_cast<char*>(p->codes.data) + r * p->row_bytes(),
                    p->row_scales() == 0 ? nullptr : static_cast<std::uint16_t*>(p->scales.data) + r * p->row_scales());
    }
  }
  upload();
}

void DeviceKv::upload() {
  backend_.copy_to_device(buffer_.view(DType::I8, {static_cast<std::int64_t>(bytes)}), host_bytes.data(), bytes);
}

void DeviceKv::download() {
  backend_.copy_to_host(host_bytes.data(), buffer_.view(DType::I8, {static_cast<std::int64_t>(bytes)}), bytes);
}

DeviceBatch::DeviceBatch(Backend& backend, const std::vector<std::pair<int, int>>& seqs,
                         const std::vector<std::vector<std::int32_t>>& blocks, std::int64_t block_size) {
  for (const auto& b : blocks) width = std::max<std::int64_t>(width, static_cast<std::int64_t>(b.size()));
  std::int64_t max_seq_len = 0, max_query_len = 0;
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
    max_seq_len = std::max<std::int64_t>(max_seq_len, len);
    max_query_len = std::max<std::int64_t>(max_query_len, fed);
  }
  const auto T = static_cast<std::int64_t>(positions.size()), S = static_cast<std::int64_t>(seqs.size());
  auto put = [&](const std::vector<std::int32_t>& v) {
    tensors_.push_back(std::make_unique<DeviceTensor>(backend, DType::I32,
                                                      std::initializer_list<std::int64_t>{static_cast<std::int64_t>(v.size())}));
    tensors_.back()->upload_values(v);
    return tensors_.back()->get();
  };
  meta.num_tokens = T;
  meta.num_seqs = S;
  meta.max_blocks_per_seq = width;
  meta.max_seq_len = max_seq_len;
  meta.max_query_len = max_query_len;
  meta.positions = put(positions);
  meta.slot_mapping = put(slots);
  meta.query_start = put(query_start);
  meta.seq_lens = put(seq_lens);
  meta.block_tables = put(tables);
}

std::vector<std::vector<std::int32_t>> shuffled_blocks(int num_seqs, int per_seq, std::mt19937& rng) {
  std::vector<std::int32_t> all(static_cast<std::size_t>(num_seqs * per_seq));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int32_t>(i);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<std::vector<std::int32_t>> out;
  for (int s = 0; s < num_seqs; ++s) out.emplace_back(all.begin() + s * per_seq, all.begin() + (s + 1) * per_seq);
  return out;
}

namespace {

// The worst error of the current test so far, kept as test properties (in
// --gtest_output=xml) for scripts/gpu_check.sh's table: the largest
// |got - want| / max(|want|, 1) and the largest share of its bound an output
// used (1 = at the bound).
void record_worst(double relative, double bound_used) {
  static std::string test;
  static double worst_relative = 0, worst_used = 0;
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return;
  const std::string name = std::string(info->test_suite_name()) + "." + info->name();
  if (name != test) {
    test = name;
    worst_relative = worst_used = 0;
  }
  worst_relative = std::max(worst_relative, relative);
  worst_used = std::max(worst_used, bound_used);
  ::testing::Test::RecordProperty("worst_relative_error", fmt::format("{:.3g}", worst_relative));
  ::testing::Test::RecordProperty("worst_bound_used", fmt::format("{:.3g}", worst_used));
}

}  // namespace

std::string compare(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& scale,
                    double tolerance, double rounding, const std::string& what) {
  if (got.size() != want.size()) return fmt::format("{}: {} values, expected {}", what, got.size(), want.size());
  double worst_relative = 0, worst_used = 0;
  struct Recorder {
    double& relative;
    double& used;
    ~Recorder() { record_worst(relative, used); }
  } recorder{worst_relative, worst_used};
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(w) || std::isnan(g)) {
      if (std::isnan(w) != std::isnan(g)) return fmt::format("{}: element {} is {}, expected {}", what, i, g, w);
      continue;
    }
    if (g == w) continue;
    // Rounding is relative down to the smallest normal of the type whose
    // unit it is (f16's is 2^-14), absolute below it.
    const double normal = rounding == 0x1p-11 ? 0x1p-14 : 0x1p-126;
    const double bound = tolerance * (i < scale.size() ? scale[i] : 0.0) + rounding * std::max(std::fabs(w), normal);
    const bool ok = bound == 0 ? g == w : std::fabs(g - w) <= bound;
    worst_relative = std::max(worst_relative, std::fabs(g - w) / std::max(std::fabs(w), 1.0));
    worst_used = std::max(worst_used, bound == 0 ? (ok ? 0.0 : 1e30) : std::fabs(g - w) / bound);
    if (!ok) return fmt::format("{}: element {} is {}, expected {} (bound {:.3g})", what, i, g, w, bound);
  }
  return {};
}

}  // namespace folio::testing
