// libFuzzer target for SafetensorsFile::from_bytes: any input either throws
// folio::Error or parses into tensors that all lie inside the input, do not
// overlap, and hold exactly their shape's bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "model/safetensors_file.h"
#include "tensor/dtype.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> bytes(data, size);
  try {
    const folio::SafetensorsFile f = folio::SafetensorsFile::from_bytes(bytes, "fuzz");
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (const folio::SafetensorsTensor& t : f.tensors()) {
      if (t.data < data || t.file_offset + t.size_bytes > size) __builtin_trap();
      const std::uint64_t element = folio::element_bytes(t.stored);
      if (static_cast<std::uint64_t>(t.num_elements) * element != t.size_bytes) __builtin_trap();
      if (f.find_tensor(t.name) != &t) __builtin_trap();
      if (t.size_bytes > 0) ranges.emplace_back(t.begin, t.begin + t.size_bytes);
    }
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i - 1].second > ranges[i].first) __builtin_trap();
  } catch (const folio::Error&) {
  }
  return 0;
}
