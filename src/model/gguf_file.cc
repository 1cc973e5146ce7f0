#include "model/gguf_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace folio {
namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read little-endian
constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;
constexpr std::size_t kMaxNameBytes = 1024;

// Bytes a value of a scalar type occupies; 0 for string and array.
std::size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

// The fewest bytes one element of a type can take on disk.
std::size_t min_size(GgufType t) {
  if (t == GgufType::kString) return 8;
  if (t == GgufType::kArray) return 12;
  return scalar_size(t);
}

bool known_type(std::uint32_t id) { return id <= static_cast<std::uint32_t>(GgufType::kF64); }

template <typename T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kU8: return "u8";
    case GgufType::kI8: return "i8";
    case GgufType::kU16: return "u16";
    case GgufType::kI16: return "i16";
    case GgufType::kU32: return "u32";
    case GgufType::kI32: return "i32";
    case GgufType::kF32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "u64";
    case GgufType::kI64: return "i64";
    case GgufType::kF64: return "f64";
  }
  return "?";
}

// ---------------------------------------------------------------- GgufValue

bool GgufValue::is_integer() const {
  switch (type_) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kU16:
    case GgufType::kI16:
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kU64:
    case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

std::uint64_t GgufValue::scalar_bits(std::size_t index) const {
  GgufType t = type_ == GgufType::kArray ? element_type_ : type_;
  const std::uint8_t* p = raw_ + index * scalar_size(t);
  switch (scalar_size(t)) {
    case 1: return load<std::uint8_t>(p);
    case 2: return load<std::uint16_t>(p);
    case 4: return load<std::uint32_t>(p);
    case 8: return load<std::uint64_t>(p);
  }
  return 0;
}

namespace {

// Integer value of element `bits` of type t, as a signed 128-bit-free pair.
struct IntValue {
  bool negative;
  std::uint64_t magnitude;
};

IntValue int_value(GgufType t, std::uint64_t bits) {
  switch (t) {
    case GgufType::kI8: {
      auto v = static_cast<std::int8_t>(bits);
      return {v < 0, static_cast<std::uint64_t>(v < 0 ? -static_cast<std::int64_t>(v) : v)};
    }
    case GgufType::kI16: {
      auto v = static_cast<std::int16_t>(bits);
      return {v < 0, static_cast<std::uint64_t>(v < 0 ? -static_cast<std::int64_t>(v) : v)};
    }
    case GgufType::kI32: {
      auto v = static_cast<std::int32_t>(bits);
      return {v < 0, static_cast<std::uint64_t>(v < 0 ? -static_cast<std::int64_t>(v) : v)};
    }
    case GgufType::kI64: {
      auto v = static_cast<std::int64_t>(bits);
      if (v >= 0) return {false, static_cast<std::uint64_t>(v)};
      return {true, static_cast<std::uint64_t>(-(v + 1)) + 1};
    }
    default:
      return {false, bits};
  }
}

double float_value(GgufType t, std::uint64_t bits) {
  if (t == GgufType::kF32) {
    auto b = static_cast<std::uint32_t>(bits);
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

}  // namespace

std::int64_t GgufValue::as_int(std::string_view key) const {
  if (!is_integer())
    fail("GGUF key {} has type {}; expected an integer", key, gguf_type_name(type_));
  IntValue v = int_value(type_, scalar_bits(0));
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (!v.negative && v.magnitude > kMax) fail("GGUF key {} value {} does not fit in int64", key, v.magnitude);
  if (v.negative) {
    if (v.magnitude > kMax + 1) fail("GGUF key {} is out of range", key);
    return v.magnitude == kMax + 1 ? std::numeric_limits<std::int64_t>::min()
                                   : -static_cast<std::int64_t>(v.magnitude);
  }
  return static_cast<std::int64_t>(v.magnitude);
}

std::uint64_t GgufValue::as_uint(std::string_view key) const {
  if (!is_integer())
    fail("GGUF key {} has type {}; expected an integer", key, gguf_type_name(type_));
  IntValue v = int_value(type_, scalar_bits(0));
  if (v.negative) fail("GGUF key {} is negative; expected a count", key);
  return v.magnitude;
}

double GgufValue::as_float(std::string_view key) const {
  if (is_float()) return float_value(type_, scalar_bits(0));
  if (is_integer()) return static_cast<double>(as_int(key));
  fail("GGUF key {} has type {}; expected a number", key, gguf_type_name(type_));
}

bool GgufValue::as_bool(std::string_view key) const {
  if (type_ != GgufType::kBool)
    fail("GGUF key {} has type {}; expected bool", key, gguf_type_name(type_));
  return raw_[0] != 0;
}

std::string_view GgufValue::as_string(std::string_view key) const {
  if (type_ != GgufType::kString)
    fail("GGUF key {} has type {}; expected string", key, gguf_type_name(type_));
  return string_;
}

const std::vector<std::string_view>& GgufValue::strings(std::string_view key) const {
  if (type_ != GgufType::kArray || element_type_ != GgufType::kString)
    fail("GGUF key {} is not an array of strings", key);
  return strings_;
}

std::vector<std::int64_t> GgufValue::ints(std::string_view key) const {
  if (type_ != GgufType::kArray) fail("GGUF key {} is not an array", key);
  GgufValue probe;
  probe.type_ = element_type_;
  if (!probe.is_integer() && element_type_ != GgufType::kBool)
    fail("GGUF key {} is an array of {}; expected integers", key, gguf_type_name(element_type_));
  std::vector<std::int64_t> out(count_);
  for (std::size_t i = 0; i < count_; ++i) {
    IntValue v = int_value(element_type_, scalar_bits(i));
    if (v.magnitude > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail("GGUF key {} element {} does not fit in int64", key, i);
    out[i] = v.negative ? -static_cast<std::int64_t>(v.magnitude) : static_cast<std::int64_t>(v.magnitude);
  }
  return out;
}

std::vector<float> GgufValue::floats(std::string_view key) const {
  if (type_ != GgufType::kArray) fail("GGUF key {} is not an array", key);
  if (element_type_ != GgufType::kF32 && element_type_ != GgufType::kF64)
    fail("GGUF key {} is an array of {}; expected floats", key, gguf_type_name(element_type_));
  std::vector<float> out(count_);
  for (std::size_t i = 0; i < count_; ++i)
    out[i] = static_cast<float>(float_value(element_type_, scalar_bits(i)));
  return out;
}

const std::vector<GgufValue>& GgufValue::items(std::string_view key) const {
  if (type_ != GgufType::kArray || element_type_ != GgufType::kArray)
    fail("GGUF key {} is not an array of arrays", key);
  return items_;
}

std::string GgufValue::to_string(std::size_t max_items) const {
  auto scalar_text = [](GgufType t, std::uint64_t bits) -> std::string {
    if (t == GgufType::kBool) return bits ? "true" : "false";
    if (t == GgufType::kF32 || t == GgufType::kF64) return fmt::format("{}", float_value(t, bits));
    IntValue v = int_value(t, bits);
    return fmt::format("{}{}", v.negative ? "-" : "", v.magnitude);
  };
  if (type_ == GgufType::kString) {
    std::string s(string_.substr(0, 80));
    for (auto& c : s)
      if (c == '\n') c = ' ';
    return fmt::format("\"{}\"{}", s, string_.size() > 80 ? "..." : "");
  }
  if (type_ != GgufType::kArray) return scalar_text(type_, scalar_bits(0));
  std::string out = "[";
  std::size_t shown = std::min(count_, max_items);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    if (element_type_ == GgufType::kString)
      out += fmt::format("\"{}\"", strings_[i].substr(0, 24));
    else if (element_type_ == GgufType::kArray)
      out += items_[i].to_string(max_items);
    else
      out += scalar_text(element_type_, scalar_bits(i));
  }
  if (count_ > shown) out += fmt::format(", ... ({} items)", count_);
  return out + "]";
}

// ---------------------------------------------------------------- parser

class GgufParser {
 public:
  GgufParser(GgufFile& file) : f_(file), bytes_(file.bytes_) {}

  void parse() {
    if (bytes_.size() < 24)
      error("header", 0, fmt::format("the file has {} bytes; a GGUF header needs 24", bytes_.size()));
    std::uint32_t magic = u32("magic");
    if (magic != kMagic) error("magic", 0, "not a GGUF file (the first four bytes are not \"GGUF\")");
    std::uint32_t version = u32("version");
    if (version == 0x02000000u || version == 0x03000000u)
      error("version", 4, "the file is big-endian; folio reads little-endian GGUF only");
    if (version != 2 && version != 3)
      error("version", 4, fmt::format("GGUF version {} is not supported (2 and 3 are)", version));
    f_.version_ = version;
    std::uint64_t num_tensors = u64("tensor_count");
    std::uint64_t num_kv = u64("metadata_kv_count");
    // Each tensor info takes at least 8+4+8+4+8 bytes and each key/value pair
    // at least 8+4+1: bound the counts by what the file could hold.
    if (num_tensors > remaining() / 32)
      error("tensor_count", 8, fmt::format("{} tensors cannot fit in a file of {} bytes", num_tensors, bytes_.size()));
    if (num_kv > remaining() / 13)
      error("metadata_kv_count", 16, fmt::format("{} key/value pairs cannot fit in a file of {} bytes", num_kv, bytes_.size()));

    f_.metadata_.reserve(num_kv);
    for (std::uint64_t i = 0; i < num_kv; ++i) read_kv(i);
    read_alignment();

    f_.tensors_.reserve(num_tensors);
    for (std::uint64_t i = 0; i < num_tensors; ++i) read_tensor_info(i);
    place_tensors();
  }

 private:
  [[noreturn]] void error(std::string_view field, std::size_t offset, const std::string& problem) const {
    fail("bad GGUF file {}: {} at byte {}: {}", f_.path_, field, offset, problem);
  }

  std::size_t remaining() const { return bytes_.size() - pos_; }

  void need(std::size_t n, std::string_view field) const {
    if (n > remaining())
      error(field, pos_, fmt::format("needs {} bytes but the file ends after {}", n, remaining()));
  }

  std::uint32_t u32(std::string_view field) {
    need(4, field);
    auto v = load<std::uint32_t>(bytes_.data() + pos_);
    pos_ += 4;
    return v;
  }

  std::uint64_t u64(std::string_view field) {
    need(8, field);
    auto v = load<std::uint64_t>(bytes_.data() + pos_);
    pos_ += 8;
    return v;
  }

  std::string_view str(std::string_view field) {
    std::size_t at = pos_;
    std::uint64_t len = u64(field);
    if (len > remaining())
      error(field, at, fmt::format("string of {} bytes runs past the end of the file ({} bytes left)", len, remaining()));
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  GgufType value_type(std::string_view field) {
    std::size_t at = pos_;
    std::uint32_t id = u32(field);
    if (!known_type(id)) error(field, at, fmt::format("unknown value type id {}", id));
    return static_cast<GgufType>(id);
  }

  void read_value(GgufValue& v, GgufType type, std::string_view key, int depth) {
    v.type_ = type;
    if (type == GgufType::kString) {
      v.string_ = str(key);
      return;
    }
    if (type != GgufType::kArray) {
      std::size_t n = scalar_size(type);
      need(n, key);
      v.raw_ = bytes_.data() + pos_;
      pos_ += n;
      return;
    }
    if (depth >= kMaxArrayDepth)
      error(key, pos_, fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth));
    v.element_type_ = value_type(key);
    std::size_t at = pos_;
    std::uint64_t count = u64(key);
    std::size_t elem_min = min_size(v.element_type_);
    if (count > remaining() / elem_min)
      error(key, at, fmt::format("array of {} {} elements cannot fit in the {} bytes left",
                                 count, gguf_type_name(v.element_type_), remaining()));
    v.count_ = count;
    if (v.element_type_ == GgufType::kString) {
      v.strings_.reserve(count);
      for (std::uint64_t i = 0; i < count; ++i) v.strings_.push_back(str(key));
    } else if (v.element_type_ == GgufType::kArray) {
      v.items_.resize(count);
      for (std::uint64_t i = 0; i < count; ++i) read_value(v.items_[i], GgufType::kArray, key, depth + 1);
    } else {
      v.raw_ = bytes_.data() + pos_;
      pos_ += count * elem_min;
    }
  }

  void read_kv(std::uint64_t index) {
    std::size_t at = pos_;
    std::string_view key = str(fmt::format("metadata key #{}", index));
    if (key.empty()) error(fmt::format("metadata key #{}", index), at, "empty key");
    std::string k(key);
    if (f_.metadata_index_.count(k)) error(k, at, "duplicate metadata key");
    GgufType type = value_type(k);
    GgufValue v;
    read_value(v, type, k, 0);
    f_.metadata_index_.emplace(k, f_.metadata_.size());
    f_.metadata_.emplace_back(std::move(k), std::move(v));
  }

  void read_alignment() {
    const GgufValue* a = f_.find("general.alignment");
    if (a == nullptr) return;
    if (a->type() != GgufType::kU32)
      error("general.alignment", 0, fmt::format("has type {}; expected u32", gguf_type_name(a->type())));
    std::uint64_t align = a->as_uint("general.alignment");
    if (align == 0 || (align & (align - 1)) != 0)
      error("general.alignment", 0, fmt::format("{} is not a power of two", align));
    f_.alignment_ = align;
  }

  void read_tensor_info(std::uint64_t index) {
    std::string field = fmt::format("tensor #{}", index);
    GgufTensorInfo t;
    std::size_t at = pos_;
    std::string_view name = str(field + " name");
    if (name.empty() || name.size() > kMaxNameBytes)
      error(field + " name", at, fmt::format("name of {} bytes (1 to {} allowed)", name.size(), kMaxNameBytes));
    t.name = std::string(name);
    field = fmt::format("tensor {}", t.name);
    if (f_.tensor_index_.count(t.name)) error(field, at, "duplicate tensor name");

    at = pos_;
    std::uint32_t num_dims = u32(field + " n_dims");
    if (num_dims == 0 || num_dims > kMaxDims)
      error(field + " n_dims", at, fmt::format("{} dimensions (1 to {} allowed)", num_dims, kMaxDims));
    t.num_dims = static_cast<int>(num_dims);
    std::int64_t elements = 1;
    for (std::uint32_t d = 0; d < num_dims; ++d) {
      at = pos_;
      std::uint64_t ne = u64(field + " shape");
      if (ne > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        error(field + " shape", at, fmt::format("dimension {} is {}, out of range", d, ne));
      t.shape[d] = static_cast<std::int64_t>(ne);
      if (__builtin_mul_overflow(elements, t.shape[d], &elements))
        error(field + " shape", at, "the product of the dimensions overflows");
    }
    t.num_elements = elements;

    at = pos_;
    std::uint32_t type_id = u32(field + " type");
    auto dt = dtype_info(type_id);
    if (!dt) error(field + " type", at, fmt::format("unknown tensor type id {}", type_id));
    t.type = dt->type;
    if (t.shape[0] % dt->block_elems != 0)
      error(field + " shape", at, fmt::format("row length {} is not a multiple of the {} block size {}",
                                              t.shape[0], dt->name, dt->block_elems));
    std::uint64_t rows = t.shape[0] == 0 ? 0 : static_cast<std::uint64_t>(elements / t.shape[0]);
    std::uint64_t row_size = static_cast<std::uint64_t>(t.shape[0] / dt->block_elems) * dt->block_bytes;
    if (__builtin_mul_overflow(row_size, rows, &t.size_bytes))
      error(field + " shape", at, "the tensor's byte size overflows");

    at = pos_;
    t.offset = u64(field + " offset");
    if (t.offset % f_.alignment_ != 0)
      error(field + " offset", at, fmt::format("offset {} is not a multiple of the alignment {}", t.offset, f_.alignment_));
    f_.tensor_index_.emplace(t.name, f_.tensors_.size());
    f_.tensors_.push_back(std::move(t));
  }

  void place_tensors() {
    std::uint64_t data = (pos_ + f_.alignment_ - 1) / f_.alignment_ * f_.alignment_;
    if (!f_.tensors_.empty() && data > bytes_.size())
      error("data section", pos_, fmt::format("starts at {} but the file has {} bytes", data, bytes_.size()));
    f_.data_offset_ = data;
    std::uint64_t data_bytes = bytes_.size() > data ? bytes_.size() - data : 0;
    for (auto& t : f_.tensors_) {
      if (t.offset > data_bytes || t.size_bytes > data_bytes - t.offset)
        error("tensor " + t.name, 0,
              fmt::format("data [{}, +{}) lies outside the data section of {} bytes", t.offset, t.size_bytes, data_bytes));
      t.file_offset = data + t.offset;
      t.data = bytes_.data() + t.file_offset;
    }
    std::vector<const GgufTensorInfo*> order;
    for (const auto& t : f_.tensors_)
      if (t.size_bytes > 0) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < order.size(); ++i)
      if (order[i - 1]->offset + order[i - 1]->size_bytes > order[i]->offset)
        error("tensor " + order[i]->name, 0,
              fmt::format("data at offset {} overlaps tensor {} at [{}, +{})", order[i]->offset,
                          order[i - 1]->name, order[i - 1]->offset, order[i - 1]->size_bytes));
  }

  GgufFile& f_;
  std::span<const std::uint8_t> bytes_;
  std::size_t pos_ = 0;
};

// ---------------------------------------------------------------- GgufFile

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.path_ = path;
  f.file_ = std::make_shared<MappedFile>(path);
  f.bytes_ = f.file_->bytes();
  GgufParser(f).parse();
  return f;
}

GgufFile GgufFile::from_bytes(std::span<const std::uint8_t> bytes, const std::string& name) {
  GgufFile f;
  f.path_ = name;
  f.bytes_ = bytes;
  GgufParser(f).parse();
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(std::string(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufValue& GgufFile::get(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) fail("{} has no metadata key {}", path_, key);
  return *v;
}

std::int64_t GgufFile::get_int(std::string_view key, std::int64_t fallback) const {
  const GgufValue* v = find(key);
  return v ? v->as_int(key) : fallback;
}

double GgufFile::get_float(std::string_view key, double fallback) const {
  const GgufValue* v = find(key);
  return v ? v->as_float(key) : fallback;
}

bool GgufFile::get_bool(std::string_view key, bool fallback) const {
  const GgufValue* v = find(key);
  return v ? v->as_bool(key) : fallback;
}

std::string GgufFile::get_string(std::string_view key, std::string_view fallback) const {
  const GgufValue* v = find(key);
  return std::string(v ? v->as_string(key) : fallback);
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace folio
