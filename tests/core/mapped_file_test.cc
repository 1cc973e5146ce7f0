// MappedFile: a read-only mapping whose pages can be given back (drop_pages)
// once a copy of them is in use, and read again from the file after that.
#include "core/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace folio {
namespace {

// Resident kilobytes of the mapping that starts at `start` (/proc/self/smaps).
long resident_kb(const void* start) {
  std::ifstream smaps("/proc/self/smaps");
  const auto want = reinterpret_cast<std::uintptr_t>(start);
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    // A mapping's header line: "lo-hi perms offset dev inode path".
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      in = lo == want;
      continue;
    }
    if (in && line.rfind("Rss:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

TEST(MappedFile, DroppedPagesLeaveTheProcessAndReadBackTheSame) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::size_t size = static_cast<std::size_t>(64 * page);
  const std::string path = ::testing::TempDir() + "/mapped_file_test.bin";
  std::vector<std::uint8_t> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::uint8_t>(i * 7 + i / 4096);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(size));

  MappedFile file(path);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < size; i += static_cast<std::size_t>(page)) sum += file.data()[i];  // touch every page
  const long before = resident_kb(file.data());
  ASSERT_EQ(before, 64 * page / 1024) << "every page touched is resident";

  // Half a page in at each end: only the 30 whole pages inside go.
  file.drop_pages(file.data() + page / 2, static_cast<std::size_t>(31 * page));
  EXPECT_EQ(resident_kb(file.data()), 34 * page / 1024);
  // Ranges outside the mapping, or running past its end, are ignored.
  file.drop_pages(bytes.data(), size);
  file.drop_pages(file.data() + size - page, static_cast<std::size_t>(2 * page));
  EXPECT_EQ(resident_kb(file.data()), 34 * page / 1024);

  EXPECT_EQ(std::memcmp(file.data(), bytes.data(), size), 0) << "dropped pages read back from the file";
  EXPECT_GT(sum, 0u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace folio
