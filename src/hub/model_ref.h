// ModelRef: a model named on the Hugging Face Hub as a user writes it:
// ORG/REPO, ORG/REPO:QUANT (the GGUF file of that quant tag, every part of a
// split one), ORG/REPO/FILE (one file), each with an optional hf:// in front
// and @REVISION after the repository; or a short alias (qwen2.5:1.5b) from
// the table in model_aliases.json. Pure parsing: no network, no files.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace folio::hub {

struct ModelRef {
  std::string repo;               // ORG/REPO
  std::string revision = "main";  // a branch, tag or commit
  std::string quant;              // a GGUF quant tag (Q4_K_M), as written; empty: not given
  std::string file;               // one file of the repository; empty: not given

  // ORG/REPO[@REV][:QUANT | /FILE], as parse_model_ref reads it.
  std::string text() const;
};

// The reference `text` names, aliases resolved; nullopt when it is not a hub
// name at all (a local path, say). A malformed hub name (hf://x, ORG/REPO:)
// throws Error saying what the forms are.
std::optional<ModelRef> parse_model_ref(std::string_view text);

// The alias table: short name -> hub reference, in the order of the file.
const std::vector<std::pair<std::string, std::string>>& model_aliases();

}  // namespace folio::hub
