// libFuzzer target for widening quantized Hugging Face weights: the first byte
// picks a quantization_config (fp8 in 128x128 blocks, per tensor, per channel,
// or bitsandbytes 4-bit), the rest is a safetensors file. Every quantized
// weight in it is widened: each either throws folio::Error or yields a tensor
// of exactly its shape's bytes, and its bits-per-weight are counted.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "core/error.h"
#include "model/hf_config.h"
#include "model/hf_quantization.h"
#include "model/safetensors_file.h"

namespace {

class FuzzSource : public folio::HfTensorSource {
 public:
  FuzzSource(const folio::SafetensorsFile& file, folio::HfQuantization q) : file_(file), q_(std::move(q)) {}
  const std::string& dir() const override { return dir_; }
  const folio::HfQuantization& quantization() const override { return q_; }
  const folio::SafetensorsTensor* find_tensor(std::string_view name) const override { return file_.find_tensor(name); }

 private:
  const folio::SafetensorsFile& file_;
  folio::HfQuantization q_;
  std::string dir_ = "fuzz";
};

nlohmann::json config_of(std::uint8_t pick) {
  switch (pick % 4) {
    case 0:
      return {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
    case 1:
      return {{"quant_method", "fp8"}};
    case 2:
      return {{"quant_method", "fbgemm_fp8"}};
    default:
      return {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}};
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  try {
    const folio::HfConfig config(nlohmann::json{{"quantization_config", config_of(data[0])}}, "fuzz config");
    const folio::SafetensorsFile f = folio::SafetensorsFile::from_bytes(std::span(data + 1, size - 1), "fuzz");
    const FuzzSource source(f, folio::HfQuantization::from_config(config));
    for (const folio::SafetensorsTensor& t : f.tensors()) {
      if (!folio::is_quantized_weight(source.quantization(), t)) continue;
      try {
        const folio::WidenedWeight w = folio::widen_weight(source, t);
        if (w.view.bytes() != w.storage.size() || w.view.ndim != 2) __builtin_trap();
        const folio::QuantizedWeightSize s = folio::quantized_weight_size(source, t);
        if (s.num_elements != w.view.numel() || s.bytes < t.size_bytes) __builtin_trap();
      } catch (const folio::Error&) {
      }
    }
  } catch (const folio::Error&) {
  }
  return 0;
}
