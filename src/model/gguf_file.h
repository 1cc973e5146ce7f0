// GgufFile: a validated, memory-mapped GGUF file (versions 2 and 3). Every count,
// length, offset and size is checked against the file before use: a hostile file
// yields an Error naming the field and its byte offset, never a crash.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"
#include "tensor/dtype.h"

namespace folio {

// Limits of the format, shared by the reader and the writer.
constexpr std::uint32_t kGgufDefaultAlignment = 32;  // when general.alignment is absent
constexpr int kGgufMaxDims = 4;                       // ggml's GGML_MAX_DIMS
constexpr std::size_t kGgufMaxTensorNameBytes = 64;   // the spec's limit on tensor names
constexpr std::size_t kGgufMaxKeyBytes = 65535;       // the spec's limit on metadata keys
constexpr int kGgufMaxArrayDepth = 8;                 // arrays of arrays, nested at most this deep
constexpr std::string_view kGgufAlignmentKey = "general.alignment";

// GGUF metadata value types, with their on-disk ids.
enum class GgufType : std::uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

std::string_view gguf_type_name(GgufType type);
// Bytes one value of a numeric or bool type takes on disk; 0 for string and array.
std::size_t gguf_scalar_bytes(GgufType type);

// One metadata value. Strings and numeric arrays point into the file's bytes,
// so a GgufValue lives no longer than its GgufFile.
class GgufValue {
 public:
  GgufType type() const { return type_; }
  bool is_integer() const;
  bool is_float() const { return type_ == GgufType::kF32 || type_ == GgufType::kF64; }
  bool is_array() const { return type_ == GgufType::kArray; }

  // Scalar accessors; each throws Error (naming `key`) on a type mismatch or,
  // for integers, a value that does not fit.
  std::int64_t as_int(std::string_view key) const;
  std::uint64_t as_uint(std::string_view key) const;
  double as_float(std::string_view key) const;  // integers convert
  bool as_bool(std::string_view key) const;
  std::string_view as_string(std::string_view key) const;

  // Array accessors.
  GgufType element_type() const { return element_type_; }
  std::size_t size() const { return count_; }
  const std::vector<std::string_view>& strings(std::string_view key) const;
  std::vector<std::int64_t> ints(std::string_view key) const;
  std::vector<float> floats(std::string_view key) const;
  const std::vector<GgufValue>& items(std::string_view key) const;  // nested arrays
  // The little-endian bytes of a scalar or of a numeric/bool array's elements;
  // empty for strings and for arrays of strings or arrays.
  std::span<const std::uint8_t> raw_bytes() const;

  // A short human-readable rendering: long arrays are summarised, strings cut,
  // and control bytes escaped so that it is safe to print.
  std::string to_string(std::size_t max_items = 8) const;

 private:
  friend class GgufParser;
  std::uint64_t scalar_bits(std::size_t index) const;

  GgufType type_ = GgufType::kU8;
  GgufType element_type_ = GgufType::kU8;  // for arrays
  std::size_t count_ = 0;                   // for arrays: number of elements
  const std::uint8_t* raw_ = nullptr;       // scalar bytes or a numeric array's first element
  std::string_view string_;
  std::vector<std::string_view> strings_;
  std::vector<GgufValue> items_;
};

struct GgufTensorInfo {
  std::string name;  // 1 to kGgufMaxTensorNameBytes bytes
  DType type = DType::F32;
  int num_dims = 0;                                // 1 to kGgufMaxDims
  std::array<std::int64_t, kGgufMaxDims> shape{1, 1, 1, 1};  // shape[0] is the row length (innermost)
  std::int64_t num_elements = 0;                   // product of shape; may be 0
  std::uint64_t offset = 0;       // relative to the data section, a multiple of the alignment
  std::uint64_t size_bytes = 0;   // bytes of data, all inside the file
  std::uint64_t file_offset = 0;  // absolute, where the bytes start in the file
  const std::uint8_t* data = nullptr;  // file_offset into the file's bytes

  std::int64_t rows() const { return num_elements / (shape[0] == 0 ? 1 : shape[0]); }
};

class GgufFile {
 public:
  // Maps and validates a file; throws Error on any problem.
  static GgufFile open(const std::string& path);
  // Validates bytes the caller keeps alive (fuzzing, tests); `name` is used in errors.
  static GgufFile from_bytes(std::span<const std::uint8_t> bytes, const std::string& name);

  const std::string& path() const { return path_; }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }
  std::size_t file_size() const { return bytes_.size(); }
  // The whole file's bytes (the mapping, or the buffer given to from_bytes).
  std::span<const std::uint8_t> bytes() const { return bytes_; }
  // Drops the mapping's resident pages inside [p, p + size) (MappedFile::drop_pages);
  // nothing for from_bytes.
  void drop_pages(const void* p, std::size_t size) const {
    if (file_ != nullptr) file_->drop_pages(p, size);
  }

  // Metadata in file order, and lookup by key.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  const GgufValue& get(std::string_view key) const;  // throws when absent
  // Typed lookups with a default for absent keys; a present key of the wrong
  // type is an error.
  std::int64_t get_int(std::string_view key, std::int64_t fallback) const;
  double get_float(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;
  std::string get_string(std::string_view key, std::string_view fallback) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;

 private:
  friend class GgufParser;
  GgufFile() = default;

  std::string path_;
  std::shared_ptr<MappedFile> file_;  // null for from_bytes
  std::span<const std::uint8_t> bytes_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = kGgufDefaultAlignment;
  std::uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::unordered_map<std::string, std::size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, std::size_t> tensor_index_;
};

}  // namespace folio
