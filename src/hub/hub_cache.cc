#include "hub/hub_cache.h"

#include <cstdlib>
#include <fstream>
#include <system_error>

#include "core/error.h"

namespace folio::hub {
namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

// models--ORG--REPO, as the Hub's own tools name a repository's folder.
std::string folder_name(const std::string& repo) {
  std::string out = "models--";
  for (char c : repo) {
    if (c == '/') {
      out += "--";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

bool is_commit_hash(const std::string& s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c))) return false;
  return true;
}

HubCache::HubCache(fs::path root) : root_(std::move(root)) {}

HubCache HubCache::from_environment() {
  if (const std::string c = env("HF_HUB_CACHE"); !c.empty()) return HubCache(c);
  if (const std::string h = env("HF_HOME"); !h.empty()) return HubCache(fs::path(h) / "hub");
  if (const std::string x = env("XDG_CACHE_HOME"); !x.empty()) return HubCache(fs::path(x) / "huggingface" / "hub");
  const std::string home = env("HOME");
  return HubCache(fs::path(home.empty() ? "." : home) / ".cache" / "huggingface" / "hub");
}

fs::path HubCache::repo_dir(const std::string& repo) const { return root_ / folder_name(repo); }

fs::path HubCache::blob(const std::string& repo, const std::string& etag) const {
  return repo_dir(repo) / "blobs" / etag;
}

fs::path HubCache::incomplete_blob(const std::string& repo, const std::string& etag) const {
  return repo_dir(repo) / "blobs" / (etag + ".incomplete");
}

fs::path HubCache::snapshot(const std::string& repo, const std::string& commit) const {
  return repo_dir(repo) / "snapshots" / commit;
}

std::optional<std::string> HubCache::commit_of(const std::string& repo, const std::string& revision) const {
  if (is_commit_hash(revision)) return revision;
  std::ifstream in(repo_dir(repo) / "refs" / revision);
  std::string commit;
  if (!(in >> commit) || !is_commit_hash(commit)) return std::nullopt;
  return commit;
}

void HubCache::set_ref(const std::string& repo, const std::string& revision, const std::string& commit) const {
  if (is_commit_hash(revision)) return;
  const fs::path dir = repo_dir(repo) / "refs";
  fs::create_directories(dir);
  const fs::path tmp = dir / (revision + ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << commit;
    if (!out) fail("could not write {}", tmp.string());
  }
  fs::rename(tmp, dir / revision);
}

fs::path HubCache::link(const std::string& repo, const std::string& commit, const std::string& path,
                        const std::string& etag) const {
  const fs::path target = snapshot(repo, commit) / path;
  fs::create_directories(target.parent_path());
  // From snapshots/COMMIT/a/b/FILE up to the repository folder, then blobs/ETAG.
  const fs::path in_snapshot(path);
  fs::path relative = "..";
  for (auto it = in_snapshot.begin(); std::next(it) != in_snapshot.end(); ++it) relative /= "..";
  relative = relative / ".." / "blobs" / etag;
  std::error_code ec;
  fs::remove(target, ec);
  fs::create_symlink(relative, target, ec);
  if (ec) fs::copy_file(blob(repo, etag), target, fs::copy_options::overwrite_existing);
  return target;
}

}  // namespace folio::hub
