// `folio pull NAME`: a model from the Hugging Face Hub into the hub's cache
// (ORG/REPO, ORG/REPO:QUANT, ORG/REPO/FILE, hf://..., or an alias), printed
// as the path to load; `-m NAME` on the other commands does the same first.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "hub/model_ref.h"

namespace folio::cli {
namespace {

struct PullCommand {
  std::string name;
  bool list_aliases = false;
};

void run_pull(const PullCommand& c) {
  if (c.list_aliases) {
    for (const auto& [alias, target] : hub::model_aliases()) fmt::print("{:<22} {}\n", alias, target);
    return;
  }
  if (c.name.empty())
    fail("name a model to pull: folio pull ORG/REPO[:QUANT] (folio pull --list-aliases for short names)");
  const std::optional<hub::ModelRef> ref = hub::parse_model_ref(c.name);
  if (!ref) fail("\"{}\" is neither a hub name (ORG/REPO[:QUANT]) nor an alias (folio pull --list-aliases)", c.name);
  const hub::PullResult r = pull_with_progress(*ref);
  std::fprintf(stderr, "pull: %s at %s: %zu files, %s downloaded\n", ref->text().c_str(),
               r.commit.substr(0, 12).c_str(), r.files.size(),
               r.bytes_downloaded > 0 ? fmt::format("{} bytes", r.bytes_downloaded).c_str() : "nothing (all cached)");
  fmt::print("{}\n", r.model.string());
}

}  // namespace

void add_pull(CLI::App& app) {
  auto c = std::make_shared<PullCommand>();
  auto* cmd = app.add_subcommand(
      "pull", "Download a model from the Hugging Face Hub into its cache, and print the path to load");
  cmd->add_option("name", c->name,
                  "ORG/REPO, ORG/REPO:QUANT (a GGUF quant tag, default Q4_K_M), ORG/REPO/FILE, hf://..., or an "
                  "alias; @REVISION after the repository picks a branch, tag or commit. HF_TOKEN for gated models, "
                  "HF_HOME or HF_HUB_CACHE for the cache, HF_ENDPOINT for another hub, HF_HUB_OFFLINE=1 for the "
                  "cache alone");
  cmd->add_flag("--list-aliases", c->list_aliases, "Print the short names and what they pull");
  cmd->callback([c] { run_pull(*c); });
}

}  // namespace folio::cli
