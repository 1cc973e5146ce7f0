#include "model/safetensors_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace folio {
namespace {

using Json = nlohmann::json;

constexpr std::size_t kLengthBytes = 8;
constexpr int kMaxJsonDepth = 4;  // {"name": {"shape": [..]}} nests three deep
constexpr std::string_view kDamaged = "the file is damaged or cut short; fetch or save it again";
constexpr std::string_view kMetadataKey = "__metadata__";

// The dtypes the format defines that folio does not compute with.
constexpr std::array<std::string_view, 14> kOtherDtypes = {"BOOL", "I8",      "I16", "U16", "I32",     "U32", "I64",
                                                           "U64",  "F64",     "F8_E5M2", "F8_E8M0", "F4",  "F6_E2M3", "C64"};

struct DtypeName {
  std::string_view name;
  SafetensorsDtype type;
  DType dtype;
};
constexpr DtypeName kDtypes[] = {
    {"F32", SafetensorsDtype::F32, DType::F32},         {"F16", SafetensorsDtype::F16, DType::F16},
    {"BF16", SafetensorsDtype::BF16, DType::BF16},      {"F8_E4M3", SafetensorsDtype::F8_E4M3, DType::I8},
    {"U8", SafetensorsDtype::U8, DType::I8},
};

// A name from the file made safe for an error message.
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

constexpr auto kInt64Max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

}  // namespace

std::string_view name(SafetensorsDtype type) {
  for (const DtypeName& d : kDtypes)
    if (d.type == type) return d.name;
  return "?";
}

std::uint64_t element_bytes(SafetensorsDtype type) {
  switch (type) {
    case SafetensorsDtype::F32:
      return 4;
    case SafetensorsDtype::F16:
    case SafetensorsDtype::BF16:
      return 2;
    case SafetensorsDtype::F8_E4M3:
    case SafetensorsDtype::U8:
      return 1;
  }
  return 1;
}

class SafetensorsParser {
 public:
  explicit SafetensorsParser(SafetensorsFile& file) : f_(file), bytes_(file.bytes_) {}

  void parse() {
    if (bytes_.size() < kLengthBytes)
      error(fmt::format("the file has {} bytes; the header length alone takes {}", bytes_.size(), kLengthBytes));
    std::uint64_t header_bytes;
    std::memcpy(&header_bytes, bytes_.data(), kLengthBytes);
    if (header_bytes > kSafetensorsMaxHeaderBytes)
      error(fmt::format("the header length {} is more than the {} bytes folio reads", header_bytes,
                        kSafetensorsMaxHeaderBytes),
            "the file is not a safetensors file, or is damaged");
    if (header_bytes > bytes_.size() - kLengthBytes)
      error(
          fmt::format("the header of {} bytes runs past the end of the file ({} bytes)", header_bytes, bytes_.size()));
    if (header_bytes < 2) error(fmt::format("the header of {} bytes cannot hold a JSON object", header_bytes));
    f_.data_offset_ = kLengthBytes + header_bytes;
    const auto* text = reinterpret_cast<const char*>(bytes_.data() + kLengthBytes);
    if (text[0] != '{')
      error("the header does not start with '{' (a JSON object)", "the file is not a safetensors file");

    // The callback refuses deep nesting before it is built, and duplicate
    // names and fields, which a JSON object would otherwise collapse into one.
    std::set<std::string> names, entry_keys;
    std::string entry_name;
    auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
      if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
          depth >= kMaxJsonDepth)
        throw Error(fmt::format("values nested deeper than {} levels", kMaxJsonDepth));
      if (event == Json::parse_event_t::key && depth == 1) {
        entry_name = parsed.get<std::string>();
        if (!names.insert(entry_name).second)
          throw Error(fmt::format("tensor {} is listed twice", printable(entry_name)));
      }
      if (event == Json::parse_event_t::object_start && depth == 1) entry_keys.clear();
      if (event == Json::parse_event_t::key && depth == 2 && !entry_keys.insert(parsed.get<std::string>()).second)
        throw Error(fmt::format("{} names {} twice", printable(entry_name), printable(parsed.get<std::string>())));
      return true;
    };
    Json header;
    try {
      header = Json::parse(text, text + header_bytes, callback, /*allow_exceptions=*/true);
    } catch (const Json::exception& e) {
      error(fmt::format("the header is not well-formed JSON ({})", e.what()));
    } catch (const Error& e) {
      error(fmt::format("the header {}", e.what()));
    }
    if (!header.is_object()) error("the header is not a JSON object");

    const std::uint64_t data_bytes = bytes_.size() - f_.data_offset_;
    for (const auto& [name, entry] : header.items()) {
      if (name == kMetadataKey) {
        read_metadata(entry);
        continue;
      }
      read_tensor(name, entry, data_bytes);
    }
    check_overlap();
    for (std::size_t i = 0; i < f_.tensors_.size(); ++i) f_.tensor_index_.emplace(f_.tensors_[i].name, i);
  }

 private:
  [[noreturn]] void error(const std::string& problem, std::string_view advice = kDamaged) const {
    fail("bad safetensors file {}: {}; {}", f_.path_, problem, advice);
  }

  void read_metadata(const Json& entry) {
    if (!entry.is_object()) error("__metadata__ is not an object of strings");
    for (const auto& [key, value] : entry.items()) {
      if (!value.is_string()) error(fmt::format("__metadata__ key {} is not a string", printable(key)));
      f_.metadata_.emplace_back(key, value.get<std::string>());
    }
  }

  static std::uint64_t unsigned_of(const Json& v) {
    if (v.is_number_unsigned()) return v.get<std::uint64_t>();
    return std::numeric_limits<std::uint64_t>::max();  // a marker the range checks refuse
  }

  void read_tensor(const std::string& name, const Json& entry, std::uint64_t data_bytes) {
    const std::string label = fmt::format("tensor {}", printable(name));
    if (name.empty()) error("a tensor has an empty name");
    if (name.size() > kSafetensorsMaxNameBytes)
      error(fmt::format("{} has a name of {} bytes; at most {} are allowed", label, name.size(),
                        kSafetensorsMaxNameBytes));
    if (!entry.is_object()) error(fmt::format("{} is not an object with dtype, shape and data_offsets", label));
    SafetensorsTensor t;
    t.name = name;

    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) error(fmt::format("{} has no dtype string", label));
    const std::string dtype = dtype_it->get<std::string>();
    const auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                    [&](const DtypeName& d) { return d.name == dtype; });
    if (known != std::end(kDtypes)) {
      t.stored = known->type;
      t.dtype = known->dtype;
    } else if (std::find(kOtherDtypes.begin(), kOtherDtypes.end(), dtype) != kOtherDtypes.end()) {
      error(fmt::format("{} has dtype {}, which folio does not read (F32, F16, BF16, and F8_E4M3 and U8 with a "
                        "quantization_config, are)",
                        label, dtype),
            "save the model in one of those (torch_dtype float32, float16 or bfloat16) or convert it to GGUF");
    } else {
      error(fmt::format("{} has unknown dtype \"{}\"", label, printable(dtype)));
    }
    const std::uint64_t element_bytes = folio::element_bytes(t.stored);

    auto shape_it = entry.find("shape");
    if (shape_it == entry.end() || !shape_it->is_array()) error(fmt::format("{} has no shape array", label));
    if (shape_it->size() > static_cast<std::size_t>(kSafetensorsMaxDims))
      error(
          fmt::format("{} has {} dimensions; folio handles at most {}", label, shape_it->size(), kSafetensorsMaxDims));
    t.num_dims = static_cast<int>(shape_it->size());
    std::int64_t elements = 1;
    for (int d = 0; d < t.num_dims; ++d) {
      const std::uint64_t n = unsigned_of((*shape_it)[static_cast<std::size_t>(d)]);
      if (n > kInt64Max) error(fmt::format("{} dimension {} is not a count (a non-negative integer)", label, d));
      t.shape[static_cast<std::size_t>(d)] = static_cast<std::int64_t>(n);
      if (__builtin_mul_overflow(elements, static_cast<std::int64_t>(n), &elements))
        error(fmt::format("{}: the product of the dimensions overflows", label));
    }
    t.num_elements = elements;
    std::uint64_t want_bytes = 0;
    if (__builtin_mul_overflow(static_cast<std::uint64_t>(elements), element_bytes, &want_bytes))
      error(fmt::format("{}: the size in bytes of {} elements overflows", label, elements));

    auto offsets_it = entry.find("data_offsets");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2)
      error(fmt::format("{} has no data_offsets pair [begin, end]", label));
    const std::uint64_t begin = unsigned_of((*offsets_it)[0]);
    const std::uint64_t end = unsigned_of((*offsets_it)[1]);
    if (begin > data_bytes || end > data_bytes)
      error(fmt::format("{} data_offsets [{}, {}] lie outside the data section of {} bytes", label,
                        (*offsets_it)[0].dump(), (*offsets_it)[1].dump(), data_bytes));
    if (end < begin) error(fmt::format("{} data_offsets [{}, {}] end before they begin", label, begin, end));
    if (end - begin != want_bytes)
      error(fmt::format("{} holds {} bytes but its shape {} of {} needs {}", label, end - begin, (*shape_it).dump(),
                        dtype, want_bytes));
    t.begin = begin;
    t.size_bytes = end - begin;
    t.file_offset = f_.data_offset_ + begin;
    // The kernels read elements in place: each must start at a multiple of its size.
    if (t.file_offset % element_bytes != 0)
      error(fmt::format("{} starts at byte {} of the file, not a multiple of its element size {}", label, t.file_offset,
                        element_bytes),
            "write the file again with a writer that pads the header");
    t.data = bytes_.data() + t.file_offset;
    f_.tensors_.push_back(std::move(t));
  }

  void check_overlap() {
    auto& ts = f_.tensors_;
    std::sort(ts.begin(), ts.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.name < b.name;
    });
    const SafetensorsTensor* prev = nullptr;
    for (const SafetensorsTensor& t : ts) {
      if (t.size_bytes == 0) continue;
      // Both lie inside the data section, so the sum cannot overflow.
      if (prev != nullptr && prev->begin + prev->size_bytes > t.begin)
        error(fmt::format("tensor {} at [{}, {}) overlaps tensor {} at [{}, {})", printable(t.name), t.begin,
                          t.begin + t.size_bytes, printable(prev->name), prev->begin, prev->begin + prev->size_bytes));
      prev = &t;
    }
  }

  SafetensorsFile& f_;
  std::span<const std::uint8_t> bytes_;
};

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  f.file_ = std::make_shared<MappedFile>(path);
  f.bytes_ = f.file_->bytes();
  SafetensorsParser(f).parse();
  return f;
}

SafetensorsFile SafetensorsFile::from_bytes(std::span<const std::uint8_t> bytes, const std::string& name) {
  SafetensorsFile f;
  f.path_ = name;
  f.bytes_ = bytes;
  SafetensorsParser(f).parse();
  return f;
}

const SafetensorsTensor* SafetensorsFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace folio
