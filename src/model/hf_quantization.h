// HfQuantization: a checkpoint's quantization_config (FP8 E4M3 weights with
// per-tensor, per-channel or block scales; bitsandbytes' 4-bit NF4/FP4 with
// its quant state) and the widening of each quantized weight to floats at
// load. Every scale and quant-state tensor is checked against its weight
// before a byte of it is read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "backend/buffer.h"
#include "model/hf_config.h"
#include "model/safetensors_file.h"
#include "tensor/tensor.h"

namespace folio {

// kMxfp4: gpt-oss's experts in MXFP4 blocks and scales, which its
// architecture repacks into GGUF MXFP4 (never widened; arch/gpt_oss_experts.h).
enum class HfQuantMethod { kNone, kFp8, kBitsandbytes4bit, kMxfp4 };
// How an FP8 weight's scales tile it.
enum class Fp8Scales { kPerTensor, kPerChannel, kBlock };

struct HfQuantization {
  HfQuantMethod method = HfQuantMethod::kNone;
  std::string quant_method;  // as config.json names it: "fp8", "fbgemm_fp8", "compressed-tensors", "bitsandbytes"
  // FP8: the scale tensor beside each weight ("weight_scale_inv" for
  // transformers' fp8 and DeepSeek-V3, "weight_scale" for the others); both
  // multiply (weight = code * scale).
  Fp8Scales fp8_scales = Fp8Scales::kPerTensor;
  std::string fp8_scale_suffix;
  std::int64_t block_rows = 0;  // weight_block_size, for kBlock
  std::int64_t block_cols = 0;

  // Reads quantization_config (absent: kNone); throws Error for a method or
  // a setting folio does not read.
  static HfQuantization from_config(const HfConfig& config);
  // "fp8 128x128 blocks", "fp8 per channel", ...: for inspect and errors.
  std::string describe() const;
};

// What widening reads: the checkpoint's name (for errors), its
// quantization_config and its tensors by name. HfCheckpoint is one; the
// fuzz target builds one from bytes.
class HfTensorSource {
 public:
  virtual ~HfTensorSource() = default;
  virtual const std::string& dir() const = 0;
  virtual const HfQuantization& quantization() const = 0;
  virtual const SafetensorsTensor* find_tensor(std::string_view name) const = 0;
};

// Whether `hf_name` is a scale or quant-state tensor that belongs to a
// quantized weight (read with it, never mapped on its own).
bool is_quantization_tensor(const HfQuantization& q, std::string_view hf_name);

// A quantized weight widened to floats: FP8 to BF16 (as transformers
// dequantizes it where it has no FP8 kernels), bitsandbytes' 4-bit to the
// quant state's dtype (f32, f16 or bf16).
struct WidenedWeight {
  Tensor view;     // [out, in]
  Buffer storage;  // host memory holding view
};

// Whether `t` needs widening (an F8_E4M3 or U8 weight of a quantized checkpoint).
bool is_quantized_weight(const HfQuantization& q, const SafetensorsTensor& t);
// Widens `t`; throws Error naming the tensor when its scales or quant state
// are missing, of the wrong type or shape, or unreadable.
WidenedWeight widen_weight(const HfTensorSource& c, const SafetensorsTensor& t);

// What a quantized weight costs as stored: its format, its numbers (the
// logical [out, in], not the packed bytes) and its bytes with every scale
// and quant-state tensor that belongs to it.
struct QuantizedWeightSize {
  std::string format;  // "fp8 128x128 blocks", "nf4", "nf4 double quant"
  std::int64_t num_elements = 0;
  std::uint64_t bytes = 0;
};
QuantizedWeightSize quantized_weight_size(const HfTensorSource& c, const SafetensorsTensor& t);

// The 16 values of bitsandbytes' NF4 code (QLoRA's 4-bit NormalFloat), in code order.
extern const float kNf4Code[16];

}  // namespace folio
