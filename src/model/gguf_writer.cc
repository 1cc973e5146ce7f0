#include "model/gguf_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace folio {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF is little-endian and the writer stores host bytes; add byte swaps for this host");
static_assert(sizeof(bool) == 1 && sizeof(float) == 4 && sizeof(double) == 8);

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read little-endian
constexpr std::uint32_t kVersion = 3;
// One less than the spec's 64: llama.cpp keeps a name in char[64] with its NUL
// and refuses a 64-byte name, and what folio writes must load there too.
constexpr std::size_t kMaxWrittenNameBytes = kGgufMaxTensorNameBytes - 1;
// Large enough that the many small records of the header leave in few system
// calls; tensor data bigger than this bypasses it.
constexpr std::size_t kBufferBytes = std::size_t{1} << 22;

void put(std::vector<std::uint8_t>& out, const void* p, std::size_t n) {
  if (n == 0) return;
  std::size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

template <typename T>
void put_le(std::vector<std::uint8_t>& out, T v) {
  put(out, &v, sizeof v);
}

void put_string(std::vector<std::uint8_t>& out, std::string_view s) {
  put_le<std::uint64_t>(out, s.size());
  put(out, s.data(), s.size());
}

bool known_type(GgufType t) { return static_cast<std::uint32_t>(t) <= static_cast<std::uint32_t>(GgufType::kF64); }

// x rounded up to a multiple of the power of two a; false on overflow.
bool align_up(std::uint64_t x, std::uint64_t a, std::uint64_t* out) {
  std::uint64_t sum;
  if (__builtin_add_overflow(x, a - 1, &sum)) return false;
  *out = sum & ~(a - 1);
  return true;
}

}  // namespace

// ---------------------------------------------------------------- GgufMetaValue

GgufMetaValue GgufMetaValue::scalar(GgufType type, const void* bytes) {
  GgufMetaValue v;
  v.type_ = type;
  const auto* b = static_cast<const std::uint8_t*>(bytes);
  v.packed_.assign(b, b + gguf_scalar_bytes(type));
  return v;
}

GgufMetaValue GgufMetaValue::string(std::string s) {
  GgufMetaValue v;
  v.type_ = GgufType::kString;
  v.strings_.push_back(std::move(s));
  return v;
}

GgufMetaValue GgufMetaValue::packed_array(GgufType element_type, const void* data, std::size_t count) {
  GgufMetaValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = element_type;
  v.count_ = count;
  v.depth_ = 1;
  const auto* b = static_cast<const std::uint8_t*>(data);
  v.packed_.assign(b, b + count * gguf_scalar_bytes(element_type));
  return v;
}

GgufMetaValue GgufMetaValue::strings(std::vector<std::string> values) {
  GgufMetaValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = GgufType::kString;
  v.count_ = values.size();
  v.depth_ = 1;
  v.strings_ = std::move(values);
  return v;
}

GgufMetaValue GgufMetaValue::array(GgufType element_type, std::vector<GgufMetaValue> items) {
  if (!known_type(element_type))
    fail("GGUF array element type id {} is unknown (0 to 12 exist)", static_cast<std::uint32_t>(element_type));
  for (std::size_t i = 0; i < items.size(); ++i)
    if (items[i].type_ != element_type)
      fail("GGUF array of {} cannot hold element {} of type {}; give every element the array's type",
           gguf_type_name(element_type), i, gguf_type_name(items[i].type_));
  GgufMetaValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = element_type;
  v.count_ = items.size();
  v.depth_ = 1;
  if (element_type == GgufType::kString) {
    for (auto& item : items) v.strings_.push_back(std::move(item.strings_[0]));
  } else if (element_type == GgufType::kArray) {
    for (const auto& item : items) v.depth_ = std::max(v.depth_, item.depth_ + 1);
    if (v.depth_ > kGgufMaxArrayDepth)
      fail("GGUF arrays nested {} deep; readers accept at most {} levels", v.depth_, kGgufMaxArrayDepth);
    v.items_ = std::move(items);
  } else {
    v.packed_.reserve(items.size() * gguf_scalar_bytes(element_type));
    for (const auto& item : items) v.packed_.insert(v.packed_.end(), item.packed_.begin(), item.packed_.end());
  }
  return v;
}

GgufMetaValue GgufMetaValue::from(const GgufValue& value) {
  constexpr std::string_view kWhat = "(copied value)";
  if (value.type() == GgufType::kString) return string(std::string(value.as_string(kWhat)));
  if (value.type() != GgufType::kArray) return scalar(value.type(), value.raw_bytes().data());
  switch (value.element_type()) {
    case GgufType::kString: {
      const auto& views = value.strings(kWhat);
      return strings(std::vector<std::string>(views.begin(), views.end()));
    }
    case GgufType::kArray: {
      std::vector<GgufMetaValue> items;
      items.reserve(value.size());
      for (const auto& item : value.items(kWhat)) items.push_back(from(item));
      return array(GgufType::kArray, std::move(items));
    }
    default:
      return packed_array(value.element_type(), value.raw_bytes().data(), value.size());
  }
}

void GgufMetaValue::encode(std::vector<std::uint8_t>& out) const {
  if (type_ == GgufType::kString) {
    put_string(out, strings_[0]);
    return;
  }
  if (type_ != GgufType::kArray) {
    put(out, packed_.data(), packed_.size());
    return;
  }
  put_le<std::uint32_t>(out, static_cast<std::uint32_t>(element_type_));
  put_le<std::uint64_t>(out, count_);
  if (element_type_ == GgufType::kString) {
    for (const auto& s : strings_) put_string(out, s);
  } else if (element_type_ == GgufType::kArray) {
    for (const auto& item : items_) item.encode(out);
  } else {
    put(out, packed_.data(), packed_.size());
  }
}

// ---------------------------------------------------------------- GgufWriter

GgufWriter::~GgufWriter() { abandon(); }

void GgufWriter::abandon() noexcept {
  if (out_ == nullptr) return;
  std::fclose(out_);
  out_ = nullptr;
  std::remove(part_path_.c_str());
}

void GgufWriter::require_not_begun(std::string_view what) const {
  if (out_ != nullptr || finished_)
    fail("GgufWriter: cannot {} after begin(); declare all metadata and tensors first", what);
}

void GgufWriter::set(std::string key, GgufMetaValue value) {
  require_not_begun("set metadata");
  if (key.empty() || key.size() > kGgufMaxKeyBytes)
    fail("GGUF metadata key of {} bytes; keys take 1 to {} bytes", key.size(), kGgufMaxKeyBytes);
  if (key == kGgufAlignmentKey) {
    if (value.type() != GgufType::kU32)
      fail("{} must be a u32, not {}", kGgufAlignmentKey, gguf_type_name(value.type()));
    std::uint32_t align;
    std::memcpy(&align, value.packed_.data(), sizeof align);
    if (align == 0 || (align & (align - 1)) != 0)
      fail("{} {} is not a power of two; use 32 (the default) or another power of two", kGgufAlignmentKey, align);
    alignment_ = align;
  }
  auto it = metadata_index_.find(key);
  if (it != metadata_index_.end()) {
    metadata_[it->second].second = std::move(value);
    return;
  }
  metadata_index_.emplace(key, metadata_.size());
  metadata_.emplace_back(std::move(key), std::move(value));
}

std::uint64_t GgufWriter::add_tensor(std::string name, DType type, std::span<const std::int64_t> shape) {
  require_not_begun("add a tensor");
  if (name.empty() || name.size() > kMaxWrittenNameBytes)
    fail("tensor name \"{}\" has {} bytes; llama.cpp reads 1 to {}", name, name.size(), kMaxWrittenNameBytes);
  if (tensor_index_.count(name)) fail("tensor {} is declared twice; tensor names must be unique", name);
  if (shape.empty() || shape.size() > static_cast<std::size_t>(kGgufMaxDims))
    fail("tensor {} has {} dimensions; GGUF allows 1 to {}", name, shape.size(), kGgufMaxDims);
  const DTypeInfo& dt = info(type);
  std::int64_t elements = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) fail("tensor {} dimension {} is {}; dimensions cannot be negative", name, d, shape[d]);
    if (__builtin_mul_overflow(elements, shape[d], &elements))
      fail("tensor {}: the product of its dimensions overflows int64", name);
  }
  if (shape[0] % dt.block_elems != 0)
    fail("tensor {} has rows of {} elements, not a multiple of the {} block size {}; pick another type for it",
         name, shape[0], dt.name, dt.block_elems);
  std::uint64_t size;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(elements / dt.block_elems),
                             static_cast<std::uint64_t>(dt.block_bytes), &size))
    fail("tensor {}: its size in bytes overflows", name);
  tensor_index_.emplace(name, tensors_.size());
  tensors_.push_back({std::move(name), type, std::vector<std::int64_t>(shape.begin(), shape.end()), size, 0});
  return size;
}

void GgufWriter::begin(const std::string& path) {
  require_not_begun("begin again");
  std::uint64_t running = 0;
  for (auto& t : tensors_) {
    t.offset = running;
    std::uint64_t end;
    if (__builtin_add_overflow(running, t.size_bytes, &end) || !align_up(end, alignment_, &running))
      fail("the tensors of {} add up to more than 2^64 bytes", path);
  }

  std::vector<std::uint8_t> head;
  put_le<std::uint32_t>(head, kMagic);
  put_le<std::uint32_t>(head, kVersion);
  put_le<std::uint64_t>(head, tensors_.size());
  put_le<std::uint64_t>(head, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    put_string(head, key);
    put_le<std::uint32_t>(head, static_cast<std::uint32_t>(value.type()));
    value.encode(head);
  }
  for (const auto& t : tensors_) {
    put_string(head, t.name);
    put_le<std::uint32_t>(head, static_cast<std::uint32_t>(t.shape.size()));
    for (std::int64_t ne : t.shape) put_le<std::uint64_t>(head, static_cast<std::uint64_t>(ne));
    put_le<std::uint32_t>(head, static_cast<std::uint32_t>(t.type));
    put_le<std::uint64_t>(head, t.offset);
  }
  align_up(head.size(), alignment_, &data_offset_);  // cannot overflow: head is in memory
  head.resize(data_offset_, 0);

  path_ = path;
  part_path_ = path + ".part";
  out_ = std::fopen(part_path_.c_str(), "wb");
  if (out_ == nullptr) fail("cannot create {}: {}; check the directory exists and is writable", part_path_, std::strerror(errno));
  buffer_.resize(kBufferBytes);
  std::setvbuf(out_, buffer_.data(), _IOFBF, buffer_.size());
  write_bytes(head.data(), head.size());
  current_ = 0;
  current_written_ = 0;
  advance_past_complete();
}

void GgufWriter::write_bytes(const void* data, std::size_t n) {
  if (n > 0 && std::fwrite(data, 1, n, out_) != n)
    fail("cannot write {}: {}; check free disk space", part_path_, std::strerror(errno));
}

void GgufWriter::write_zeros(std::uint64_t n) {
  static constexpr std::array<std::uint8_t, 4096> kZeros{};
  while (n > 0) {
    std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(n, kZeros.size()));
    write_bytes(kZeros.data(), chunk);
    n -= chunk;
  }
}

void GgufWriter::advance_past_complete() {
  while (current_ < tensors_.size() && current_written_ == tensors_[current_].size_bytes) {
    const TensorEntry& t = tensors_[current_];
    std::uint64_t end = t.offset + t.size_bytes;
    std::uint64_t padded = end;
    align_up(end, alignment_, &padded);  // cannot overflow: begin() checked every end
    write_zeros(padded - end);
    ++current_;
    current_written_ = 0;
  }
}

void GgufWriter::write_tensor_data(std::string_view name, std::span<const std::uint8_t> bytes) {
  if (out_ == nullptr) fail("GgufWriter: write_tensor_data({}) needs begin() first", name);
  if (tensor_index_.find(std::string(name)) == tensor_index_.end())
    fail("GgufWriter: no tensor {} was declared; add_tensor() it before begin()", name);
  if (bytes.empty()) return;
  if (current_ >= tensors_.size())
    fail("GgufWriter: every tensor is complete, so {} more bytes for {} are too many", bytes.size(), name);
  const TensorEntry& t = tensors_[current_];
  if (name != t.name)
    fail("GgufWriter: tensor {} is next and has {} of {} bytes; tensors are written in the order declared, not {}",
         t.name, current_written_, t.size_bytes, name);
  if (bytes.size() > t.size_bytes - current_written_)
    fail("GgufWriter: {} bytes for tensor {} would pass its size of {} bytes ({} already written)", bytes.size(),
         t.name, t.size_bytes, current_written_);
  write_bytes(bytes.data(), bytes.size());
  current_written_ += bytes.size();
  advance_past_complete();
}

void GgufWriter::finish() {
  if (out_ == nullptr) fail("GgufWriter: finish() needs begin() first");
  if (current_ < tensors_.size())
    fail("GgufWriter: tensor {} has {} of its {} bytes; write all tensor data before finish()",
         tensors_[current_].name, current_written_, tensors_[current_].size_bytes);
  if (std::fflush(out_) != 0) fail("cannot write {}: {}; check free disk space", part_path_, std::strerror(errno));
  std::FILE* f = std::exchange(out_, nullptr);
  if (std::fclose(f) != 0) {
    int err = errno;
    std::remove(part_path_.c_str());
    fail("cannot close {}: {}; check free disk space", part_path_, std::strerror(err));
  }
  if (std::rename(part_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    std::remove(part_path_.c_str());
    fail("cannot rename {} to {}: {}", part_path_, path_, std::strerror(err));
  }
  finished_ = true;
}

}  // namespace folio
