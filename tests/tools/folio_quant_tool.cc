// folio_quant_tool: runs folio's reference (de)quantizers on whole files so
// the Python tests can compare them with the gguf package, byte for byte.

// Usage:
//   folio_quant_tool dequantize TYPE IN OUT   raw blocks in, float32 out
//   folio_quant_tool quantize TYPE IN OUT     float32 in, raw blocks out
//   folio_quant_tool types                    id name block_elems block_bytes dequantizable quantizable
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "tensor/dtype.h"
#include "tensor/quantize.h"

namespace {

// The largest GGUF type id; dtype_info knows which ids below it exist.
constexpr std::uint32_t kMaxTypeId = 255;

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) folio::fail("cannot open {} for reading", path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const void* data, std::size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) folio::fail("cannot write {}", path);
}

folio::DType parse_type(const std::string& text) {
  const auto type = folio::parse_dtype(text);
  if (!type) folio::fail("unknown type '{}'; run `folio_quant_tool types` for the list", text);
  return *type;
}

void dequantize_file(folio::DType type, const std::string& in_path, const std::string& out_path) {
  const auto& t = folio::info(type);
  const std::vector<char> blocks = read_file(in_path);
  const auto num_bytes = static_cast<std::int64_t>(blocks.size());
  if (num_bytes % t.block_bytes != 0)
    folio::fail("{} holds {} bytes, not a whole number of {}-byte {} blocks", in_path, num_bytes, t.block_bytes,
                t.name);
  const std::int64_t n = num_bytes / t.block_bytes * t.block_elems;
  std::vector<float> out(static_cast<std::size_t>(n));
  folio::dequantize_row(type, blocks.data(), out.data(), n);
  write_file(out_path, out.data(), out.size() * sizeof(float));
}

void quantize_file(folio::DType type, const std::string& in_path, const std::string& out_path) {
  const std::vector<char> bytes = read_file(in_path);
  if (bytes.size() % sizeof(float) != 0) folio::fail("{} holds {} bytes, not whole float32s", in_path, bytes.size());
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  const auto n = static_cast<std::int64_t>(values.size());
  std::vector<char> out(static_cast<std::size_t>(folio::row_bytes(type, n)));
  folio::quantize_row(type, values.data(), out.data(), n);
  write_file(out_path, out.data(), out.size());
}

void print_types() {
  for (std::uint32_t id = 0; id <= kMaxTypeId; ++id) {
    const auto t = folio::dtype_info(id);
    if (!t) continue;
    std::printf("%u %s %lld %lld %d %d\n", id, std::string(t->name).c_str(), static_cast<long long>(t->block_elems),
                static_cast<long long>(t->block_bytes), t->dequantizable ? 1 : 0, folio::can_quantize(t->type) ? 1 : 0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 1 && args[0] == "types") {
      print_types();
      return 0;
    }
    if (args.size() == 4 && args[0] == "dequantize") {
      dequantize_file(parse_type(args[1]), args[2], args[3]);
      return 0;
    }
    if (args.size() == 4 && args[0] == "quantize") {
      quantize_file(parse_type(args[1]), args[2], args[3]);
      return 0;
    }
    std::fprintf(stderr, "usage: folio_quant_tool dequantize|quantize TYPE IN OUT\n       folio_quant_tool types\n");
    return 2;
  } catch (const folio::Error& e) {
    std::fprintf(stderr, "folio_quant_tool: %s\n", e.what());
    return 1;
  }
}
