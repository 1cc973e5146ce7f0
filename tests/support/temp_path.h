// TempPath: a file path unique to the running test, process and instance, removed
// (with its .part sibling) when the test ends.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

namespace folio::testing {

class TempPath {
 public:
  explicit TempPath(const std::string& suffix = ".gguf") {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    static int counter = 0;  // several paths in one test
    std::string file = fmt::format("folio_{}_{}_{}_{}{}", test->test_suite_name(), test->name(), ::getpid(), counter++,
                                   suffix);
    std::replace(file.begin(), file.end(), '/', '_');  // parameterised tests have a / in their names
    path_ = (std::filesystem::temp_directory_path() / file).string();
  }
  ~TempPath() {
    std::filesystem::remove(path_);
    std::filesystem::remove(path_ + ".part");
  }
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

}  // namespace folio::testing
