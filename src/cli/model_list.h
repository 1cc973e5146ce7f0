// The models one `folio serve` serves: every -m (NAME=MODEL or MODEL) and
// every model in --models-dir, in that order, each with the name requests
// use and a rough size for the memory budget before it has loaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace folio::cli {

struct ListedModel {
  std::string name;  // empty: named after its file once resolved
  std::string text;  // as given: a path or a hub name
};

// "NAME=MODEL" names a model; a text whose part before '=' holds a '/' or a
// '.' is a path or hub name as it stands.
ListedModel parse_listed_model(const std::string& text);
// The GGUF files (first parts of split ones; no mmproj) and Hugging Face
// directories (with a config.json) in `dir`, sorted by name. Throws Error
// when `dir` cannot be read.
std::vector<ListedModel> models_in_dir(const std::string& dir);
// Bytes of a model's weights on disk: a file's size, or a directory's
// .safetensors and .gguf files together.
std::int64_t weight_bytes_on_disk(const std::string& path);

}  // namespace folio::cli
