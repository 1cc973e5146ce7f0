// HubClient: the Hugging Face Hub's public HTTP API over libcurl: a
// repository's files at a revision (GET /api/models/REPO/revision/REV?blobs=true),
// and one file's bytes (GET /REPO/resolve/COMMIT/PATH, redirects followed,
// resumed with Range after a cut). $HF_ENDPOINT names another hub (a mirror,
// or the tests' stand-in); $HF_TOKEN (or the token file in $HF_HOME) is sent
// as a bearer token for gated and private repositories, never to another host
// a redirect leads to. A failure is a HubError that says what to do.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace folio::hub {

class HubError : public Error {
 public:
  HubError(int status, const std::string& message) : Error(message), status_(status) {}
  int status() const { return status_; }  // the HTTP status; 0 when no answer came

 private:
  int status_;
};

struct RepoFile {
  std::string path;
  std::int64_t size = 0;
  std::string sha256;   // of the whole file, for files in LFS (the big ones); empty otherwise
  std::string blob_id;  // git's blob id (SHA-1 of "blob SIZE\0" + bytes) for the others
  // The name of its blob in the cache: the SHA-256 for LFS files, the blob id otherwise.
  const std::string& etag() const { return sha256.empty() ? blob_id : sha256; }
};

struct RepoInfo {
  std::string commit;  // what the revision resolved to
  std::vector<RepoFile> files;
};

// Bytes of a file so far and its whole size.
using Progress = std::function<void(std::int64_t done, std::int64_t total)>;

struct HubSettings {
  std::string endpoint = "https://huggingface.co";
  std::string token;  // empty: none
  // A 429 is retried after Retry-After (at most this long each time), and a
  // transfer cut short resumes, this many times before giving up.
  int max_retries = 5;
  int max_wait_s = 30;
  // The environment's: HF_ENDPOINT, HF_TOKEN (or HUGGING_FACE_HUB_TOKEN, or
  // the file $HF_HOME/token).
  static HubSettings from_environment();
};

class HubClient {
 public:
  explicit HubClient(HubSettings settings);
  ~HubClient();
  HubClient(const HubClient&) = delete;
  HubClient& operator=(const HubClient&) = delete;

  RepoInfo repo_info(const std::string& repo, const std::string& revision);
  // Downloads `file` of `repo` at `commit` into `dest`, appending to what a
  // cut transfer left there; returns once `dest` holds file.size bytes.
  void download(const std::string& repo, const std::string& commit, const RepoFile& file,
                const std::filesystem::path& dest, const Progress& progress);

 private:
  struct Response;
  Response get(const std::string& url, const std::filesystem::path* append_to, std::int64_t offset,
               const Progress& progress, std::int64_t total);
  std::string url(const std::string& path) const;

  HubSettings settings_;
};

}  // namespace folio::hub
