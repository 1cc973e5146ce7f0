#include "cli/commands.h"

#include <cstdlib>
#include <filesystem>

namespace folio::cli {

void register_commands(CLI::App& app) {
  add_inspect(app);
  add_tokenize(app);
  add_run(app);
  add_perplexity(app);
  add_kv_calc(app);
  add_serve(app);
  add_bench(app);
  add_quantize(app);
}

std::string default_model_path() {
  std::string dir;
  if (const char* env = std::getenv("FOLIO_MODELS")) {
    dir = env;
  } else {
    const char* home = std::getenv("HOME");
    dir = std::string(home ? home : ".") + "/.cache/folio/models";
  }
  return dir + "/smollm2-135m-instruct-q4_1.gguf";
}

std::string find_near_binary(const std::vector<std::string>& candidates) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (const std::string& c : candidates) {
    for (const fs::path& base : {exe_dir, exe_dir.parent_path(), fs::current_path()}) {
      if (base.empty()) continue;
      const fs::path p = base / c;
      if (fs::exists(p, ec)) return p.string();
    }
  }
  return {};
}

}  // namespace folio::cli
