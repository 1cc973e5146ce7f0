// libFuzzer target for GgufFile::from_bytes: any input either throws folio::Error
// or parses into a file whose every accessor is safe and whose metadata re-encodes
// to equal values; no single allocation may outgrow the input by more than 32x.
#include <sanitizer/allocator_interface.h>

#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "tensor/dtype.h"

namespace {

using folio::GgufFile;
using folio::GgufType;
using folio::GgufValue;

// The largest allocation allowed while the target runs; 0 outside it. The
// reader's containers hold at most ~16 bytes of bookkeeping per input byte
// (a GgufValue per 12-byte nested array, doubled by vector growth).
std::size_t g_allocation_limit = 0;
constexpr std::size_t kBytesPerInputByte = 32;
constexpr std::size_t kFixedAllowance = 64 * 1024;  // messages, fmt buffers, round-trip files

void on_malloc(const volatile void*, std::size_t size) {
  if (g_allocation_limit != 0 && size > g_allocation_limit) {
    std::size_t limit = std::exchange(g_allocation_limit, 0);
    std::fprintf(stderr, "gguf_fuzz: one allocation of %zu bytes exceeds the %zu the input justifies\n", size, limit);
    __builtin_trap();
  }
}

void on_free(const volatile void*) {}

// Keeps reads from being optimised away, so ASan sees every byte touched.
volatile std::uint64_t g_sink;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

template <typename F>
void may_throw(F&& f) {
  try {
    f();
  } catch (const folio::Error&) {
  }
}

void touch_bytes(std::span<const std::uint8_t> bytes) {
  std::uint64_t sum = 0;
  for (std::uint8_t b : bytes) sum += b;
  g_sink = g_sink + sum;
}

void touch_string(std::string_view s) {
  touch_bytes({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()});
}

void touch_value(const GgufValue& v, std::string_view key) {
  touch_string(v.to_string());
  touch_string(v.to_string(0));
  g_sink = g_sink + v.is_integer() + v.is_float() + v.is_array() + static_cast<std::uint32_t>(v.type());
  may_throw([&] { g_sink = g_sink + static_cast<std::uint64_t>(v.as_int(key)); });
  may_throw([&] { g_sink = g_sink + v.as_uint(key); });
  may_throw([&] { g_sink = g_sink + static_cast<std::uint64_t>(v.as_float(key) != 0); });
  may_throw([&] { g_sink = g_sink + v.as_bool(key); });
  may_throw([&] { touch_string(v.as_string(key)); });
  touch_bytes(v.raw_bytes());
  if (!v.is_array()) return;
  g_sink = g_sink + v.size() + static_cast<std::uint32_t>(v.element_type());
  may_throw([&] {
    for (std::int64_t i : v.ints(key)) g_sink = g_sink + static_cast<std::uint64_t>(i);
  });
  may_throw([&] {
    for (float f : v.floats(key)) g_sink = g_sink + (f > 0);
  });
  may_throw([&] {
    const auto& strings = v.strings(key);
    check(strings.size() == v.size());
    for (std::string_view s : strings) touch_string(s);
  });
  may_throw([&] {
    const auto& items = v.items(key);
    check(items.size() == v.size());
    for (const auto& item : items) touch_value(item, key);
  });
}

bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type() != b.type()) return false;
  auto ra = a.raw_bytes(), rb = b.raw_bytes();
  if (ra.size() != rb.size() || (ra.size() && std::memcmp(ra.data(), rb.data(), ra.size()) != 0)) return false;
  if (a.type() == GgufType::kString) return a.as_string("a") == b.as_string("b");
  if (a.type() != GgufType::kArray) return true;
  if (a.element_type() != b.element_type() || a.size() != b.size()) return false;
  if (a.element_type() == GgufType::kString) return a.strings("a") == b.strings("b");
  if (a.element_type() != GgufType::kArray) return true;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!same_value(a.items("a")[i], b.items("b")[i])) return false;
  return true;
}

// One key/value re-encoded by the writer into a file of its own must read back equal.
void round_trip(const std::string& key, const GgufValue& v) {
  folio::GgufMetaValue copy = folio::GgufMetaValue::from(v);
  std::vector<std::uint8_t> file = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
  auto put64 = [&](std::uint64_t x) {
    for (int i = 0; i < 8; ++i) file.push_back(static_cast<std::uint8_t>(x >> (8 * i)));
  };
  put64(0);  // tensors
  put64(1);  // key/value pairs
  put64(key.size());
  file.insert(file.end(), key.begin(), key.end());
  for (int i = 0; i < 4; ++i) file.push_back(static_cast<std::uint8_t>(static_cast<std::uint32_t>(v.type()) >> (8 * i)));
  copy.encode(file);
  try {
    GgufFile again = GgufFile::from_bytes(file, "round trip");
    check(again.metadata().size() == 1);
    check(same_value(v, again.metadata()[0].second));
  } catch (const folio::Error&) {
    __builtin_trap();  // the writer wrote what the reader refuses
  }
}

void touch_file(const GgufFile& f) {
  check(f.version() == 2 || f.version() == 3);
  check(f.alignment() != 0 && (f.alignment() & (f.alignment() - 1)) == 0);
  check(f.data_offset() % f.alignment() == 0);
  touch_string(f.path());
  for (const auto& entry : f.metadata()) {
    const std::string& key = entry.first;  // a named reference: clang 14 cannot capture bindings
    const GgufValue& value = entry.second;
    check(f.find(key) == &value);
    check(&f.get(key) == &value);
    touch_value(value, key);
    may_throw([&] { g_sink = g_sink + static_cast<std::uint64_t>(f.get_int(key, 0)); });
    may_throw([&] { g_sink = g_sink + static_cast<std::uint64_t>(f.get_float(key, 0) != 0); });
    may_throw([&] { g_sink = g_sink + f.get_bool(key, false); });
    may_throw([&] { touch_string(f.get_string(key, "")); });
    round_trip(key, value);
  }
  for (const auto& t : f.tensors()) {
    check(f.find_tensor(t.name) == &t);
    check(!t.name.empty() && t.name.size() <= folio::kGgufMaxTensorNameBytes);
    check(t.num_dims >= 1 && t.num_dims <= folio::kGgufMaxDims);
    std::int64_t elements = 1;
    for (std::int64_t d : t.shape) {
      check(d >= 0);
      elements *= d;  // cannot overflow: the reader checked the same product
    }
    check(elements == t.num_elements);
    const folio::DTypeInfo& dt = folio::info(t.type);
    check(t.shape[0] % dt.block_elems == 0);
    std::uint64_t expected_bytes;
    check(!__builtin_mul_overflow(static_cast<std::uint64_t>(elements / dt.block_elems),
                                  static_cast<std::uint64_t>(dt.block_bytes), &expected_bytes));
    check(expected_bytes == t.size_bytes);
    check(t.offset % f.alignment() == 0);
    check(t.file_offset == f.data_offset() + t.offset);
    check(t.file_offset <= f.file_size() && t.size_bytes <= f.file_size() - t.file_offset);
    g_sink = g_sink + static_cast<std::uint64_t>(t.rows()) + static_cast<std::uint32_t>(t.type);
    touch_string(folio::name(t.type));
    touch_bytes({t.data, t.size_bytes});
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  g_allocation_limit = kBytesPerInputByte * size + kFixedAllowance;
  try {
    GgufFile f = GgufFile::from_bytes({data, size}, "fuzz input");
    touch_file(f);
  } catch (const folio::Error& e) {
    touch_string(e.what());
  }
  g_allocation_limit = 0;
  return 0;
}
