// GgufWriter: writes a GGUF v3 file that GgufFile accepts. Metadata and tensor
// infos are declared first; tensor data then streams to disk in declaration order,
// so no second copy of it is held, and the file takes its name only when complete.
#pragma once

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "model/gguf_file.h"
#include "tensor/dtype.h"

namespace folio {

// A metadata value to write: a scalar, a string, or an array of any of these
// (arrays of arrays included, each inner array with its own element type).
// Numeric arrays are kept packed, one copy of their bytes.
class GgufMetaValue {
 public:
  static GgufMetaValue u8(std::uint8_t v) { return scalar(GgufType::kU8, &v); }
  static GgufMetaValue i8(std::int8_t v) { return scalar(GgufType::kI8, &v); }
  static GgufMetaValue u16(std::uint16_t v) { return scalar(GgufType::kU16, &v); }
  static GgufMetaValue i16(std::int16_t v) { return scalar(GgufType::kI16, &v); }
  static GgufMetaValue u32(std::uint32_t v) { return scalar(GgufType::kU32, &v); }
  static GgufMetaValue i32(std::int32_t v) { return scalar(GgufType::kI32, &v); }
  static GgufMetaValue f32(float v) { return scalar(GgufType::kF32, &v); }
  static GgufMetaValue boolean(bool v) {
    std::uint8_t b = v ? 1 : 0;
    return scalar(GgufType::kBool, &b);
  }
  static GgufMetaValue string(std::string v);
  static GgufMetaValue u64(std::uint64_t v) { return scalar(GgufType::kU64, &v); }
  static GgufMetaValue i64(std::int64_t v) { return scalar(GgufType::kI64, &v); }
  static GgufMetaValue f64(double v) { return scalar(GgufType::kF64, &v); }

  // An array of `items`, each of which must have type `element_type` (an Error
  // otherwise); nesting deeper than kGgufMaxArrayDepth is refused, as the reader
  // would refuse it.
  static GgufMetaValue array(GgufType element_type, std::vector<GgufMetaValue> items);
  // Packed arrays without a value object per element: T is one of uint8_t,
  // int8_t, ..., uint64_t, int64_t, float, double, bool.
  template <typename T>
  static GgufMetaValue array_of(std::span<const T> values);
  static GgufMetaValue strings(std::vector<std::string> values);
  // A copy of a value read from a file, for rewriting a file's metadata.
  static GgufMetaValue from(const GgufValue& value);

  GgufType type() const { return type_; }
  GgufType element_type() const { return element_type_; }  // arrays only
  std::uint64_t size() const { return count_; }             // arrays: number of elements

  // Appends the value's bytes as they follow its type id in a file.
  void encode(std::vector<std::uint8_t>& out) const;

 private:
  friend class GgufWriter;
  GgufMetaValue() = default;
  static GgufMetaValue scalar(GgufType type, const void* bytes);
  static GgufMetaValue packed_array(GgufType element_type, const void* data, std::size_t count);

  GgufType type_ = GgufType::kU8;
  GgufType element_type_ = GgufType::kU8;  // arrays
  std::uint64_t count_ = 0;                 // arrays
  int depth_ = 0;                           // arrays: 1 + the depth of the deepest item
  std::vector<std::uint8_t> packed_;        // a scalar's bytes, or a numeric array's elements
  std::vector<std::string> strings_;        // a string (one entry), or an array's strings
  std::vector<GgufMetaValue> items_;        // an array of arrays
};

namespace detail {
template <typename T>
constexpr GgufType gguf_type_of() {
  if constexpr (std::is_same_v<T, std::uint8_t>) return GgufType::kU8;
  else if constexpr (std::is_same_v<T, std::int8_t>) return GgufType::kI8;
  else if constexpr (std::is_same_v<T, std::uint16_t>) return GgufType::kU16;
  else if constexpr (std::is_same_v<T, std::int16_t>) return GgufType::kI16;
  else if constexpr (std::is_same_v<T, std::uint32_t>) return GgufType::kU32;
  else if constexpr (std::is_same_v<T, std::int32_t>) return GgufType::kI32;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return GgufType::kU64;
  else if constexpr (std::is_same_v<T, std::int64_t>) return GgufType::kI64;
  else if constexpr (std::is_same_v<T, float>) return GgufType::kF32;
  else if constexpr (std::is_same_v<T, double>) return GgufType::kF64;
  else if constexpr (std::is_same_v<T, bool>) return GgufType::kBool;
  else static_assert(sizeof(T) == 0, "no GGUF array type for this element type");
}
}  // namespace detail

template <typename T>
GgufMetaValue GgufMetaValue::array_of(std::span<const T> values) {
  return packed_array(detail::gguf_type_of<T>(), values.data(), values.size());
}

class GgufWriter {
 public:
  GgufWriter() = default;
  // An unfinished file is closed and its partial copy removed.
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Sets a metadata key. Setting a key again keeps its first position and takes
  // the new value (so copied metadata can be overridden). general.alignment must
  // be a u32 power of two; it sets the alignment of the tensor data.
  void set(std::string key, GgufMetaValue value);
  void set_alignment(std::uint32_t alignment) { set(std::string(kGgufAlignmentKey), GgufMetaValue::u32(alignment)); }
  std::uint32_t alignment() const { return alignment_; }

  // Declares the next tensor. shape[0] is the row length (innermost), as in
  // GgufTensorInfo; it must be a multiple of the type's block size. Returns the
  // number of data bytes the tensor takes.
  std::uint64_t add_tensor(std::string name, DType type, std::span<const std::int64_t> shape);
  std::uint64_t add_tensor(std::string name, DType type, std::initializer_list<std::int64_t> shape) {
    return add_tensor(std::move(name), type, std::span<const std::int64_t>(shape.begin(), shape.size()));
  }

  // Creates `path`.part and writes the header, metadata, tensor infos and the
  // padding before the data. After it, metadata and tensors are fixed.
  void begin(const std::string& path);
  // Appends bytes of tensor `name`, which must be the first declared tensor not
  // yet complete; a tensor may come in several pieces, which must add up to its
  // size exactly. Zero-size tensors need no call.
  void write_tensor_data(std::string_view name, std::span<const std::uint8_t> bytes);
  // Checks that every tensor is complete, flushes, and renames the file to `path`.
  void finish();

  // Bytes of everything before the tensor data, once begun.
  std::uint64_t data_offset() const { return data_offset_; }

 private:
  struct TensorEntry {
    std::string name;
    DType type;
    std::vector<std::int64_t> shape;
    std::uint64_t size_bytes = 0;
    std::uint64_t offset = 0;  // relative to the data section; set by begin()
  };

  void require_not_begun(std::string_view what) const;
  void write_bytes(const void* data, std::size_t n);
  void write_zeros(std::uint64_t n);
  void advance_past_complete();  // moves current_ past tensors with nothing left to write
  void abandon() noexcept;

  std::vector<std::pair<std::string, GgufMetaValue>> metadata_;
  std::unordered_map<std::string, std::size_t> metadata_index_;
  std::vector<TensorEntry> tensors_;
  std::unordered_map<std::string, std::size_t> tensor_index_;
  std::uint32_t alignment_ = kGgufDefaultAlignment;

  std::string path_;                 // final name
  std::string part_path_;            // written here until finish()
  std::FILE* out_ = nullptr;         // open between begin() and finish()
  std::vector<char> buffer_;         // stdio buffer: few large writes for small records
  bool finished_ = false;
  std::uint64_t data_offset_ = 0;
  std::size_t current_ = 0;          // the tensor being written
  std::uint64_t current_written_ = 0;
};

}  // namespace folio
