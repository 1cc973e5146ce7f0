// pull_model: a model named on the Hugging Face Hub, made local: the files
// that a ModelRef picks (a GGUF file by its quant tag, every part of a split
// one; or a safetensors checkpoint's weights, config, tokenizer and
// sentence-transformers files) downloaded into the hub's cache layout, each
// resumed after a cut and checked against the hub's SHA-256 (git's blob id for
// small files) before it is kept. With $HF_HUB_OFFLINE set, only the cache is
// read. Returns what folio loads: the GGUF file (its first part) or the
// snapshot folder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "hub/hub_cache.h"
#include "hub/hub_client.h"
#include "hub/model_ref.h"

namespace folio::hub {

// Which files of a repository a reference picks, and the path folio loads
// (relative to the snapshot; "" for the snapshot itself). Throws Error naming
// what the repository offers when nothing fits.
struct FilePick {
  std::vector<std::string> files;
  std::string model;
};
FilePick pick_files(const ModelRef& ref, const std::vector<std::string>& repo_files);

struct PullOptions {
  bool offline = false;  // $HF_HUB_OFFLINE: the cache only
  // Called as each file starts (its path and size) and as its bytes arrive.
  std::function<void(const std::string& path, std::int64_t size)> on_file;
  Progress on_bytes;
  // The environment's: HF_HUB_OFFLINE (1, true or yes).
  static PullOptions from_environment();
};

struct PullResult {
  std::filesystem::path model;     // the file or folder to load
  std::filesystem::path snapshot;  // its snapshot folder
  std::string commit;
  std::int64_t bytes_downloaded = 0;
  std::vector<std::string> files;
};

PullResult pull_model(const ModelRef& ref, const HubCache& cache, HubClient* client, const PullOptions& options);

// The SHA-256 of a file, in lower-case hex; git's blob id (SHA-1 of "blob
// SIZE\0" and the bytes) likewise.
std::string sha256_of_file(const std::filesystem::path& path);
std::string git_blob_id_of_file(const std::filesystem::path& path);

}  // namespace folio::hub
