#include "cli/commands.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>

#include "core/error.h"
#include "core/version.h"

namespace folio::cli {


int run_app(CLI::App& app, int argc, char** argv) {
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("folio ") + version_string() + " (" + git_commit() + ")");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const Error& e) {
    std::fprintf(stderr, "folio: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "folio: unexpected error: %s\n", e.what());
    return 1;
  }
  return 0;
}

std::string default_model_path() {
  std::string dir;
  if (const char* env = std::getenv("FOLIO_MODELS")) {
    dir = env;
  } else {
    const char* home = std::getenv("HOME");
    dir = std::string(home ? home : ".") + "/.cache/folio/models";
  }
  return dir + "/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
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
