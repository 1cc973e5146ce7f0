// HubCache: the Hugging Face Hub's cache layout on disk, shared with the
// other tools that use it (huggingface_hub, transformers, llama.cpp's -hf):
// ROOT/models--ORG--REPO/{blobs/ETAG, snapshots/COMMIT/PATH -> blob,
// refs/REVISION = COMMIT}. ROOT is $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
// Plain files only: no network.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace folio::hub {

class HubCache {
 public:
  explicit HubCache(std::filesystem::path root);
  // The root the environment names (see above).
  static HubCache from_environment();

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path repo_dir(const std::string& repo) const;
  std::filesystem::path blob(const std::string& repo, const std::string& etag) const;
  // Where a blob is written until it is whole and verified.
  std::filesystem::path incomplete_blob(const std::string& repo, const std::string& etag) const;
  std::filesystem::path snapshot(const std::string& repo, const std::string& commit) const;

  // The commit a revision (a branch or tag) resolved to when last pulled;
  // a 40-hex revision is its own commit.
  std::optional<std::string> commit_of(const std::string& repo, const std::string& revision) const;
  void set_ref(const std::string& repo, const std::string& revision, const std::string& commit) const;
  // snapshots/COMMIT/PATH as a relative link to the blob (a copy where links
  // cannot be made); returns its path.
  std::filesystem::path link(const std::string& repo, const std::string& commit, const std::string& path,
                             const std::string& etag) const;

 private:
  std::filesystem::path root_;
};

// Whether `s` is a full commit hash (40 hex digits).
bool is_commit_hash(const std::string& s);

}  // namespace folio::hub
