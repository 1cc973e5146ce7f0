// `folio inspect MODEL`: what a model file holds, checked and summarised.
#include <fmt/format.h>

#include "cli/commands.h"
#include "model/gguf_file.h"

namespace folio::cli {

void add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Show a model's architecture, hyper-parameters and tensors");
  auto model = std::make_shared<std::string>();
  auto show_all = std::make_shared<bool>(false);
  cmd->add_option("model,-m,--model", *model, "GGUF file (default: the default model)");
  cmd->add_flag("--all-metadata", *show_all, "Print every metadata key");
  cmd->callback([model, show_all] {
    std::string path = model->empty() ? default_model_path() : *model;
    GgufFile f = GgufFile::open(path);
    fmt::print("file: {} (GGUF v{}, {} bytes)\n", path, f.version(), f.file_size());
    for (const auto& [key, value] : f.metadata()) {
      if (!*show_all && key.rfind("tokenizer.ggml.", 0) == 0 && value.is_array()) continue;
      fmt::print("  {} = {}\n", key, value.to_string());
    }
    for (const auto& t : f.tensors())
      fmt::print("  {:<32} {:<6} [{}, {}, {}, {}] {}\n", t.name, name(t.type), t.shape[0], t.shape[1],
                 t.shape[2], t.shape[3], t.size_bytes);
  });
}

}  // namespace folio::cli
