#include "cli/model_list.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include "core/error.h"

namespace folio::cli {
namespace fs = std::filesystem;

ListedModel parse_listed_model(const std::string& text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return {"", text};
  const std::string name = text.substr(0, eq);
  if (name.find_first_of("/.") != std::string::npos) return {"", text};
  if (eq + 1 == text.size()) fail("-m {}: name a model after the '=' (NAME=MODEL)", text);
  return {name, text.substr(eq + 1)};
}

std::vector<ListedModel> models_in_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("--models-dir {}: there is no such folder", dir);
  static const std::regex kLaterPart(R"(-(\d{5})-of-\d{5}\.gguf$)");
  std::vector<ListedModel> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string file = e.path().filename().string();
    if (e.is_directory(ec)) {
      if (fs::exists(e.path() / "config.json", ec)) out.push_back({file, e.path().string()});
      continue;
    }
    if (e.path().extension() != ".gguf" || file.find("mmproj") != std::string::npos) continue;
    std::smatch m;
    if (std::regex_search(file, m, kLaterPart) && m[1].str() != "00001") continue;
    out.push_back({e.path().stem().string(), e.path().string()});
  }
  if (ec) fail("--models-dir {}: {}", dir, ec.message());
  std::sort(out.begin(), out.end(), [](const ListedModel& a, const ListedModel& b) { return a.name < b.name; });
  return out;
}

std::int64_t weight_bytes_on_disk(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    const auto size = fs::file_size(path, ec);
    return ec ? 0 : static_cast<std::int64_t>(size);
  }
  std::int64_t total = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    const auto ext = e.path().extension();
    if (ext == ".safetensors" || ext == ".gguf") {
      const auto size = fs::file_size(e.path(), ec);
      if (!ec) total += static_cast<std::int64_t>(size);
    }
  }
  return total;
}

}  // namespace folio::cli
