// The op-conformance suite's frame (tests/backend/ops): every backend that
// make_backend can build here, each op's test body run once per backend
// against the scalar reference in f32, in the spirit of llama.cpp's
// test-backend-ops. Tensors reach a backend only through allocate and
// copy_to_device (weights through load_weight from host memory, as a model
// file's do), outputs are poisoned before each run and fenced by guard bytes,
// and inputs are drawn fresh per case. A new backend gets the whole suite by
// being listed in test_backends().
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_factory.h"
#include "tensor/kv_dtype.h"

namespace folio::testing {

// One backend as the suite runs it, and how close to the f32 reference its
// ops must come. Bounds are |got - want| <= tolerance x scale + rounding x
// |want|, where scale is each test's natural size of an output (for matmul
// the sum of |w x| over the row); 0 and 0 mean bit-identical.
struct BackendUnderTest {
  std::string label;        // test-name suffix: "cpu_avx2_q8"
  BackendOptions options;
  double rounding = 0;      // relative rounding of its activation type (0 for f32)
  double float_ops = 1e-5;  // rms_norm, glu, attention, expert and f32 matmuls: float reassociation
  bool q8_activations = false;  // its matmul quantizes activations to 8 bits per block
  bool matmul_only = false;     // a second precision of a backend: only the matmul suite runs it
  bool exact_elementwise = true;  // rope, add, scale, routing and gates give the reference's bits
  bool batch_invariant = true;    // a row's bits never depend on its batch (rule 5)

  std::unique_ptr<Backend> make() const { return make_backend(options); }
};

// Every backend this machine can run: the reference in f32, f16 and bf16,
// the CPU backend at each SIMD level it has in both matmul precisions, the
// sealed backend, and where a CUDA device is present the cuda backend in
// f32 and bf16 activations (plus its cuBLAS matmul path, which is not batch
// invariant); op_backends() leaves out the second precisions.
std::vector<BackendUnderTest> test_backends();
std::vector<BackendUnderTest> op_backends();
std::string backend_label(const ::testing::TestParamInfo<BackendUnderTest>& info);
void PrintTo(const BackendUnderTest& backend, std::ostream* os);

// The fixture of every op test: the backend of the case, made fresh.
class OpTest : public ::testing::TestWithParam<BackendUnderTest> {
 protected:
  void SetUp() override { backend_ = GetParam().make(); }
  Backend& be() { return *backend_; }
  DType act() { return backend_->activation_dtype(); }

 private:
  std::unique_ptr<Backend> backend_;
};

// A tensor made on a backend through allocate, with 64 guard bytes before
// and after its data, offset `misalign` bytes from a 64-byte boundary; its
// data is poisoned (all bytes 0xFF: NaN for floats, -1 for ints) until
// uploaded.
class DeviceTensor {
 public:
  DeviceTensor(Backend& backend, DType dtype, std::initializer_list<std::int64_t> shape, std::size_t misalign = 0);
  Tensor& operator*() { return tensor_; }
  Tensor* operator->() { return &tensor_; }
  const Tensor& get() const { return tensor_; }

  void upload(const void* bytes, std::size_t size);
  // Floats converted on the host to the tensor's type (F32, F16 or BF16).
  void upload_floats(const std::vector<float>& values);
  template <typename T>
  void upload_values(const std::vector<T>& values) {
    upload(values.data(), values.size() * sizeof(T));
  }
  std::vector<std::uint8_t> download() const;
  std::vector<float> download_floats() const;
  template <typename T>
  std::vector<T> download_values() const {
    const std::vector<std::uint8_t> bytes = download();
    std::vector<T> out(bytes.size() / sizeof(T));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    return out;
  }
  // Fails the test when anything wrote outside the tensor.
  void expect_guards_intact(const std::string& what) const;

 private:
  Backend& backend_;
  Buffer buffer_;
  Tensor tensor_;
  std::size_t offset_;
};

// Host bytes at an odd address (a model file's tensors may lie anywhere).
struct HostBytes {
  std::vector<std::uint8_t> storage;
  std::size_t offset;
  HostBytes(std::size_t bytes, std::size_t off) : storage(bytes + 64), offset(off) {}
  std::uint8_t* data() { return storage.data() + offset; }
};

// A weight put on a backend as a model's are: host bytes -> load_weight.
struct DeviceWeight {
  Tensor tensor;
  Buffer storage;
  DeviceWeight(Backend& backend, const Tensor& host);
};

// Random floats, normal with the given scale.
std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float scale = 1.0f);
// Floats as the activation type `type` holds them (rounded through it).
std::vector<float> rounded_to(DType type, std::vector<float> values);

// Random weights [rows, k] of any type: float types from uniform floats,
// block types from random bytes (every code) with sane binary16 scales.
void fill_weights(DType type, std::int64_t rows, std::int64_t k, std::uint8_t* dst, std::mt19937& rng);

// The weight types the backends compute with.
const std::vector<DType>& weight_types();
bool is_kquant(DType type);  // 256-element blocks (K-quants and IQ4_XS)
// Elements per block of the 8-bit activations the q8 kernels of `type` take:
// 256 for the K-quants (kQ8x256), 32 for the others (kQ8x32; IQ4_XS too).
std::int64_t act_block_elems(DType type);
// Row lengths that test a type's matmul: one block, a few, and many.
std::vector<std::int64_t> matmul_widths(DType type);

// A paged KV cache of num_blocks blocks on a backend, with its host mirror
// (the same layout): random rows encoded in each pool's type, uploaded; and
// block tables giving each sequence a shuffled set of blocks.
struct DeviceKv {
  DeviceKv(Backend& backend, KvCacheDType type, std::int64_t num_blocks, std::int64_t kv_heads,
           std::int64_t block_size, std::int64_t head_dim, std::int64_t value_head_dim, std::mt19937& rng);
  void upload();    // host -> device
  void download();  // device -> host
  PagedKv device;
  PagedKv host;     // over host_bytes
  std::vector<std::uint8_t> host_bytes;
  std::size_t bytes = 0;

 private:
  Backend& backend_;
  Buffer buffer_;
};

// One step's attention metadata on a backend: sequences of (context length,
// new tokens), each with its own blocks.
struct DeviceBatch {
  DeviceBatch(Backend& backend, const std::vector<std::pair<int, int>>& seqs,
              const std::vector<std::vector<std::int32_t>>& blocks, std::int64_t block_size);
  std::vector<std::int32_t> positions, slots, query_start{0}, seq_lens, tables;
  std::int64_t width = 0;
  AttentionMetadata meta;

 private:
  std::vector<std::unique_ptr<DeviceTensor>> tensors_;
};

std::vector<std::vector<std::int32_t>> shuffled_blocks(int num_seqs, int per_seq, std::mt19937& rng);

// |got[i] - want[i]| <= tolerance * scale[i] + rounding * |want[i]| for every
// i (equal when both are 0, +0 and -0 alike; NaN must meet NaN; rounding is
// absolute below the smallest f16 normal). Returns the first failure,
// described with `what`, or an empty string. Bit-identity is checked on the
// bytes.
std::string compare(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& scale,
                    double tolerance, double rounding, const std::string& what);

}  // namespace folio::testing

// Instantiates a TEST_P suite over op_backends() (FOLIO_MATMUL_SUITE: over
// test_backends(), every matmul precision).
#define FOLIO_OP_SUITE(Fixture) \
  INSTANTIATE_TEST_SUITE_P(Backends, Fixture, ::testing::ValuesIn(::folio::testing::op_backends()), \
                           ::folio::testing::backend_label)
#define FOLIO_MATMUL_SUITE(Fixture) \
  INSTANTIATE_TEST_SUITE_P(Backends, Fixture, ::testing::ValuesIn(::folio::testing::test_backends()), \
                           ::folio::testing::backend_label)
