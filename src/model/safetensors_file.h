// SafetensorsFile: a validated, memory-mapped .safetensors file (an 8-byte
// header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the data). Every length, shape and range is checked against the
// file before use, as GgufFile does for GGUF: a hostile file yields an Error
// naming the tensor and the problem, never a crash.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/mapped_file.h"
#include "tensor/dtype.h"

namespace folio {

// Limits folio sets on what it reads.
constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100u << 20;  // as the format's own reader
constexpr int kSafetensorsMaxDims = 4;                            // what a Tensor holds
constexpr std::size_t kSafetensorsMaxNameBytes = 1024;

// The element types folio reads from a safetensors file: the float types it
// computes with, and the bytes quantized checkpoints store beside a
// quantization_config (FP8 E4M3 weights; bitsandbytes' packed 4-bit pairs,
// 8-bit absmax codes and quant-state JSON in U8).
enum class SafetensorsDtype : std::uint8_t { F32, F16, BF16, F8_E4M3, U8 };
std::string_view name(SafetensorsDtype type);  // as the file spells it: "F8_E4M3"
std::uint64_t element_bytes(SafetensorsDtype type);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype stored = SafetensorsDtype::F32;
  // The float type of an F32, F16 or BF16 tensor. F8_E4M3 and U8 tensors are
  // codes that only the quantization_config explains: DType::I8 here, a type
  // no op computes with, so none can be used by mistake.
  DType dtype = DType::F32;
  int num_dims = 0;                                       // 0 (a scalar) to kSafetensorsMaxDims
  std::array<std::int64_t, kSafetensorsMaxDims> shape{};  // outermost first, as PyTorch writes it
  std::int64_t num_elements = 1;
  std::uint64_t begin = 0;        // data_offsets, relative to the data section
  std::uint64_t size_bytes = 0;   // end - begin == num_elements * element size
  std::uint64_t file_offset = 0;  // absolute
  const std::uint8_t* data = nullptr;
};

class SafetensorsFile {
 public:
  // Maps and validates a file; throws Error on any problem.
  static SafetensorsFile open(const std::string& path);
  // Validates bytes the caller keeps alive (tests); `name` is used in errors.
  static SafetensorsFile from_bytes(std::span<const std::uint8_t> bytes, const std::string& name);

  const std::string& path() const { return path_; }
  std::span<const std::uint8_t> bytes() const { return bytes_; }
  std::uint64_t data_offset() const { return data_offset_; }  // 8 + header length

  // Tensors in the order of their data; lookup by name.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find_tensor(std::string_view name) const;
  // The string pairs of __metadata__ (absent: empty).
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }

 private:
  friend class SafetensorsParser;
  SafetensorsFile() = default;

  std::string path_;
  std::shared_ptr<MappedFile> file_;  // null for from_bytes
  std::span<const std::uint8_t> bytes_;
  std::uint64_t data_offset_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, std::size_t> tensor_index_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

}  // namespace folio
