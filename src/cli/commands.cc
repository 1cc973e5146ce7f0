#include "cli/commands.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>

#include "core/error.h"
#include "core/version.h"
#include "hub/pull.h"

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

namespace {

// "1.2 GiB"
std::string bytes_text(std::int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace

hub::PullResult pull_with_progress(const hub::ModelRef& ref) {
  const hub::HubCache cache = hub::HubCache::from_environment();
  hub::PullOptions options = hub::PullOptions::from_environment();
  std::unique_ptr<hub::HubClient> client;
  if (!options.offline) client = std::make_unique<hub::HubClient>(hub::HubSettings::from_environment());
  const bool tty = isatty(fileno(stderr)) != 0;
  std::string current;
  auto last = std::chrono::steady_clock::now();
  const auto started = last;
  options.on_file = [&](const std::string& path, std::int64_t size) {
    if (tty && !current.empty()) std::fputc('\n', stderr);
    current = path;
    std::fprintf(stderr, "pull: %s %s (%s)%s", ref.repo.c_str(), path.c_str(), bytes_text(size).c_str(),
                 tty ? "" : "\n");
  };
  options.on_bytes = [&](std::int64_t done, std::int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (!tty || now - last < std::chrono::milliseconds(200)) return;
    last = now;
    const double seconds = std::chrono::duration<double>(now - started).count();
    std::fprintf(stderr, "\rpull: %s %s  %s / %s  %3.0f%%  %s/s   ", ref.repo.c_str(), current.c_str(),
                 bytes_text(done).c_str(), bytes_text(total).c_str(),
                 total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                 bytes_text(static_cast<std::int64_t>(static_cast<double>(done) / std::max(seconds, 1e-3))).c_str());
  };
  hub::PullResult result = hub::pull_model(ref, cache, client.get(), options);
  if (tty && !current.empty()) std::fputc('\n', stderr);
  return result;
}

std::string resolve_model(const std::string& text) {
  if (text.empty()) return default_model_path();
  std::error_code ec;
  if (std::filesystem::exists(text, ec)) return text;
  const std::optional<hub::ModelRef> ref = hub::parse_model_ref(text);
  if (!ref) return text;
  try {
    return pull_with_progress(*ref).model.string();
  } catch (const Error& e) {
    fail("there is no file or folder {} here, and as a model on the Hugging Face Hub: {}", text, e.what());
  }
}

std::string served_name_of(const std::string& text, const std::string& path) {
  std::error_code ec;
  if (!text.empty() && !std::filesystem::exists(text, ec) && hub::parse_model_ref(text))
    return text.starts_with("hf://") ? text.substr(5) : text;
  return std::filesystem::path(path).stem().string();
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
