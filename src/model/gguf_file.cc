#include "model/gguf_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace folio {
namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read little-endian
constexpr std::size_t kHeaderBytes = 24;      // magic, version, tensor_count, metadata_kv_count
// The fewest bytes one record can take, used to bound counts by the file size:
// a key/value pair is a key (8-byte length + 1 byte), a type id and a 1-byte value;
// a tensor info is a name (8 + 1), n_dims, one dimension, a type id and an offset.
constexpr std::size_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr std::size_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;
constexpr std::string_view kDamaged = "the file is damaged or cut short; fetch or convert it again";

// Bytes one element of a type takes at the least on disk.
std::size_t min_bytes(GgufType t) {
  if (t == GgufType::kString) return 8;      // the length
  if (t == GgufType::kArray) return 4 + 8;   // element type and count
  return gguf_scalar_bytes(t);
}

bool known_type(std::uint32_t id) { return id <= static_cast<std::uint32_t>(GgufType::kF64); }

bool is_signed(GgufType t) {
  return t == GgufType::kI8 || t == GgufType::kI16 || t == GgufType::kI32 || t == GgufType::kI64;
}

// An integer of type t, sign-extended from its stored bits.
std::int64_t signed_value(GgufType t, std::uint64_t bits) {
  switch (t) {
    case GgufType::kI8: return static_cast<std::int8_t>(bits);
    case GgufType::kI16: return static_cast<std::int16_t>(bits);
    case GgufType::kI32: return static_cast<std::int32_t>(bits);
    default: return static_cast<std::int64_t>(bits);
  }
}

constexpr auto kInt64Max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

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

template <typename T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A key or tensor name from the file made safe for an error message: bytes
// outside printable ASCII are escaped and long names cut, so a hostile name
// cannot flood a log or a terminal.
std::string printable(std::string_view s) {
  constexpr std::size_t kMaxShown = 96;
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (out.size() >= kMaxShown) return out + fmt::format("...({} bytes)", s.size());
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f)
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

// A string value for display: UTF-8 passes through, but white space becomes a
// space and other control bytes are escaped, so printing a hostile file's
// metadata cannot move a terminal's cursor or forge lines of output.
std::string displayable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '\n' || c == '\r' || c == '\t')
      out += ' ';
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += ch;
  }
  return out;
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

std::size_t gguf_scalar_bytes(GgufType type) {
  switch (type) {
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
  const std::uint8_t* p = raw_ + index * gguf_scalar_bytes(t);
  switch (gguf_scalar_bytes(t)) {
    case 1: return load<std::uint8_t>(p);
    case 2: return load<std::uint16_t>(p);
    case 4: return load<std::uint32_t>(p);
    case 8: return load<std::uint64_t>(p);
  }
  return 0;
}

std::int64_t GgufValue::as_int(std::string_view key) const {
  if (!is_integer())
    fail("GGUF key {} has type {}; expected an integer", key, gguf_type_name(type_));
  std::uint64_t bits = scalar_bits(0);
  if (is_signed(type_)) return signed_value(type_, bits);
  if (bits > kInt64Max) fail("GGUF key {} value {} does not fit in int64", key, bits);
  return static_cast<std::int64_t>(bits);
}

std::uint64_t GgufValue::as_uint(std::string_view key) const {
  if (!is_integer())
    fail("GGUF key {} has type {}; expected an integer", key, gguf_type_name(type_));
  std::uint64_t bits = scalar_bits(0);
  if (!is_signed(type_)) return bits;
  std::int64_t v = signed_value(type_, bits);
  if (v < 0) fail("GGUF key {} is {}; expected a count, which cannot be negative", key, v);
  return static_cast<std::uint64_t>(v);
}

double GgufValue::as_float(std::string_view key) const {
  if (is_float()) return float_value(type_, scalar_bits(0));
  if (is_integer()) {
    std::uint64_t bits = scalar_bits(0);
    return is_signed(type_) ? static_cast<double>(signed_value(type_, bits)) : static_cast<double>(bits);
  }
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
    std::uint64_t bits = scalar_bits(i);
    if (is_signed(element_type_)) {
      out[i] = signed_value(element_type_, bits);
    } else {
      if (bits > kInt64Max) fail("GGUF key {} element {} is {}, which does not fit in int64", key, i, bits);
      out[i] = static_cast<std::int64_t>(bits);
    }
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

std::span<const std::uint8_t> GgufValue::raw_bytes() const {
  if (type_ == GgufType::kString) return {};
  if (type_ != GgufType::kArray) return {raw_, gguf_scalar_bytes(type_)};
  if (element_type_ == GgufType::kString || element_type_ == GgufType::kArray) return {};
  return {raw_, count_ * gguf_scalar_bytes(element_type_)};
}

std::string GgufValue::to_string(std::size_t max_items) const {
  auto scalar_text = [](GgufType t, std::uint64_t bits) -> std::string {
    if (t == GgufType::kBool) return bits ? "true" : "false";
    if (t == GgufType::kF32 || t == GgufType::kF64) return fmt::format("{}", float_value(t, bits));
    if (is_signed(t)) return fmt::format("{}", signed_value(t, bits));
    return fmt::format("{}", bits);
  };
  if (type_ == GgufType::kString)
    return fmt::format("\"{}\"{}", displayable(string_.substr(0, 80)), string_.size() > 80 ? "..." : "");
  if (type_ != GgufType::kArray) return scalar_text(type_, scalar_bits(0));
  std::string out = "[";
  std::size_t shown = std::min(count_, max_items);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    if (element_type_ == GgufType::kString)
      out += fmt::format("\"{}\"", displayable(strings_[i].substr(0, 24)));
    else if (element_type_ == GgufType::kArray)
      out += items_[i].to_string(max_items);
    else
      out += scalar_text(element_type_, scalar_bits(i));
  }
  if (count_ > shown) out += fmt::format(", ... ({} items)", count_);
  return out + "]";
}

// ---------------------------------------------------------------- parser

// Reads the file front to back. Containers grow as records are actually read,
// never reserved from a count the file states, so memory stays proportional to
// the bytes parsed however large the counts claim to be.
class GgufParser {
 public:
  explicit GgufParser(GgufFile& file) : f_(file), bytes_(file.bytes_) {}

  void parse() {
    if (bytes_.size() < kHeaderBytes)
      error("header", 0, fmt::format("the file has {} bytes; a GGUF header needs {}", bytes_.size(), kHeaderBytes));
    std::uint32_t magic = u32("magic");
    if (magic != kMagic)
      error("magic", 0, "the first four bytes are not \"GGUF\"",
            "the file is not a GGUF model; pass a .gguf file");
    std::uint32_t version = u32("version");
    if (version == 0x02000000u || version == 0x03000000u)
      error("version", 4, "the file is big-endian",
            "folio reads little-endian GGUF only; convert it with gguf-py's gguf_convert_endian");
    if (version != 2 && version != 3)
      error("version", 4, fmt::format("GGUF version {} is not supported (2 and 3 are)", version),
            "convert the model again with a current llama.cpp");
    f_.version_ = version;
    std::uint64_t num_tensors = u64("tensor_count");
    std::uint64_t num_kv = u64("metadata_kv_count");
    if (num_tensors > remaining() / kMinTensorInfoBytes)
      error("tensor_count", 8, fmt::format("{} tensors cannot fit in a file of {} bytes", num_tensors, bytes_.size()));
    if (num_kv > remaining() / kMinKvBytes)
      error("metadata_kv_count", 16,
            fmt::format("{} key/value pairs cannot fit in a file of {} bytes", num_kv, bytes_.size()));

    for (std::uint64_t i = 0; i < num_kv; ++i) read_kv(i);
    // Now that the metadata is read, the tensor infos must fit in what is left.
    if (num_tensors > remaining() / kMinTensorInfoBytes)
      error("tensor_count", 8,
            fmt::format("{} tensors cannot fit in the {} bytes after the metadata", num_tensors, remaining()));
    for (std::uint64_t i = 0; i < num_tensors; ++i) read_tensor_info(i);
    place_tensors();
  }

 private:
  [[noreturn]] void error(std::string_view field, std::size_t offset, const std::string& problem,
                          std::string_view advice = kDamaged) const {
    fail("bad GGUF file {}: {} at byte {}: {}; {}", f_.path_, field, offset, problem, advice);
  }

  std::size_t remaining() const { return bytes_.size() - pos_; }

  void need(std::size_t n, std::string_view field) const {
    if (n > remaining())
      error(field, pos_, fmt::format("needs {} bytes but the file ends {} bytes later", n, remaining()));
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
    if (!known_type(id)) error(field, at, fmt::format("unknown value type id {} (0 to 12 exist)", id));
    return static_cast<GgufType>(id);
  }

  void read_value(GgufValue& v, GgufType type, std::string_view key, int depth) {
    v.type_ = type;
    if (type == GgufType::kString) {
      v.string_ = str(key);
      return;
    }
    if (type != GgufType::kArray) {
      need(gguf_scalar_bytes(type), key);
      v.raw_ = bytes_.data() + pos_;
      pos_ += gguf_scalar_bytes(type);
      return;
    }
    if (depth >= kGgufMaxArrayDepth)
      error(key, pos_, fmt::format("arrays nested deeper than {} levels", kGgufMaxArrayDepth));
    v.element_type_ = value_type(key);
    std::size_t at = pos_;
    std::uint64_t count = u64(key);
    std::size_t elem_min = min_bytes(v.element_type_);
    if (count > remaining() / elem_min)
      error(key, at, fmt::format("array of {} {} elements cannot fit in the {} bytes left", count,
                                 gguf_type_name(v.element_type_), remaining()));
    v.count_ = count;
    if (v.element_type_ == GgufType::kString) {
      for (std::uint64_t i = 0; i < count; ++i) v.strings_.push_back(str(key));
    } else if (v.element_type_ == GgufType::kArray) {
      for (std::uint64_t i = 0; i < count; ++i) {
        v.items_.emplace_back();
        read_value(v.items_.back(), GgufType::kArray, key, depth + 1);
      }
    } else {
      v.raw_ = bytes_.data() + pos_;
      pos_ += count * elem_min;
    }
  }

  void read_kv(std::uint64_t index) {
    std::size_t at = pos_;
    std::string field = fmt::format("metadata key #{}", index);
    std::string_view key = str(field);
    if (key.empty()) error(field, at, "the key is empty");
    if (key.size() > kGgufMaxKeyBytes)
      error(field, at, fmt::format("the key has {} bytes; at most {} are allowed", key.size(), kGgufMaxKeyBytes));
    std::string k(key);
    std::string shown = printable(k);
    if (f_.metadata_index_.count(k)) error(shown, at, "duplicate metadata key");
    std::size_t value_at = pos_;
    GgufType type = value_type(shown);
    GgufValue v;
    read_value(v, type, shown, 0);
    if (k == kGgufAlignmentKey) set_alignment(v, value_at);
    f_.metadata_index_.emplace(k, f_.metadata_.size());
    f_.metadata_.emplace_back(std::move(k), std::move(v));
  }

  // general.alignment governs every tensor offset that follows, so it is
  // checked where it is read.
  void set_alignment(const GgufValue& v, std::size_t at) {
    if (v.type() != GgufType::kU32)
      error(kGgufAlignmentKey, at, fmt::format("has type {}; expected u32", gguf_type_name(v.type())));
    std::uint64_t align = v.as_uint(kGgufAlignmentKey);
    if (align == 0 || (align & (align - 1)) != 0)
      error(kGgufAlignmentKey, at + 4, fmt::format("{} is not a power of two", align));
    f_.alignment_ = align;
  }

  void read_tensor_info(std::uint64_t index) {
    GgufTensorInfo t;
    std::size_t at = pos_;
    std::string field = fmt::format("tensor #{} name", index);
    std::string_view name = str(field);
    if (name.empty() || name.size() > kGgufMaxTensorNameBytes)
      error(field, at, fmt::format("name of {} bytes (1 to {} allowed)", name.size(), kGgufMaxTensorNameBytes));
    t.name = std::string(name);
    std::string label = fmt::format("tensor #{} ({})", index, printable(t.name));
    if (f_.tensor_index_.count(t.name)) error(label + " name", at, "duplicate tensor name");

    at = pos_;
    std::uint32_t num_dims = u32(label + " n_dims");
    if (num_dims == 0 || num_dims > kGgufMaxDims)
      error(label + " n_dims", at, fmt::format("{} dimensions (1 to {} allowed)", num_dims, kGgufMaxDims));
    t.num_dims = static_cast<int>(num_dims);
    const std::size_t dims_at = pos_;
    std::int64_t elements = 1;
    for (std::uint32_t d = 0; d < num_dims; ++d) {
      at = pos_;
      std::uint64_t ne = u64(label + " dims");
      if (ne > kInt64Max) error(label + " dims", at, fmt::format("dimension {} is {}, out of range", d, ne));
      t.shape[d] = static_cast<std::int64_t>(ne);
      if (__builtin_mul_overflow(elements, t.shape[d], &elements))
        error(label + " dims", dims_at, "the product of the dimensions overflows int64");
    }
    t.num_elements = elements;

    at = pos_;
    std::uint32_t type_id = u32(label + " type");
    auto dt = dtype_info(type_id);
    if (!dt) error(label + " type", at, fmt::format("unknown tensor type id {}", type_id));
    t.type = dt->type;
    if (t.shape[0] % dt->block_elems != 0)
      error(label + " dims", dims_at,
            fmt::format("row length {} is not a multiple of the {} block size {}", t.shape[0], dt->name,
                        dt->block_elems));
    // shape[0] is a whole number of blocks, so the element count is too.
    auto blocks = static_cast<std::uint64_t>(elements / dt->block_elems);
    if (__builtin_mul_overflow(blocks, static_cast<std::uint64_t>(dt->block_bytes), &t.size_bytes))
      error(label + " dims", dims_at, fmt::format("the size in bytes of {} {} elements overflows", elements, dt->name));

    at = pos_;
    t.offset = u64(label + " offset");
    if (t.offset % f_.alignment_ != 0)
      error(label + " offset", at,
            fmt::format("offset {} is not a multiple of the alignment {}", t.offset, f_.alignment_));
    offset_at_.push_back(at);
    f_.tensor_index_.emplace(t.name, f_.tensors_.size());
    f_.tensors_.push_back(std::move(t));
  }

  void place_tensors() {
    // pos_ <= file size and alignment < 2^32: no overflow.
    std::uint64_t data = (pos_ + f_.alignment_ - 1) / f_.alignment_ * f_.alignment_;
    f_.data_offset_ = data;
    if (!f_.tensors_.empty() && data > bytes_.size())
      error("data section", pos_,
            fmt::format("starts at byte {} (padded to the alignment {}) but the file has {} bytes", data,
                        f_.alignment_, bytes_.size()));
    std::uint64_t data_bytes = bytes_.size() > data ? bytes_.size() - data : 0;
    for (std::size_t i = 0; i < f_.tensors_.size(); ++i) {
      auto& t = f_.tensors_[i];
      if (t.offset > data_bytes || t.size_bytes > data_bytes - t.offset)
        error(fmt::format("tensor #{} ({}) offset", i, printable(t.name)), offset_at_[i],
              fmt::format("data [{}, +{}) lies outside the data section of {} bytes", t.offset, t.size_bytes,
                          data_bytes));
      t.file_offset = data + t.offset;
      t.data = bytes_.data() + t.file_offset;
    }
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < f_.tensors_.size(); ++i)
      if (f_.tensors_[i].size_bytes > 0) order.push_back(i);
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return f_.tensors_[a].offset < f_.tensors_[b].offset; });
    for (std::size_t k = 1; k < order.size(); ++k) {
      const auto& prev = f_.tensors_[order[k - 1]];
      const auto& cur = f_.tensors_[order[k]];
      // Both lie inside the data section, so the sum cannot overflow.
      if (prev.offset + prev.size_bytes > cur.offset)
        error(fmt::format("tensor #{} ({}) offset", order[k], printable(cur.name)), offset_at_[order[k]],
              fmt::format("data at [{}, +{}) overlaps tensor {} at [{}, +{})", cur.offset, cur.size_bytes,
                          printable(prev.name), prev.offset, prev.size_bytes));
    }
  }

  GgufFile& f_;
  std::span<const std::uint8_t> bytes_;
  std::size_t pos_ = 0;
  std::vector<std::size_t> offset_at_;  // per tensor: where its offset field lies in the file
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
  if (v == nullptr)
    fail("{} has no metadata key {}; the file may be for another architecture or from an old converter", path_,
         key);
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
