#include "cli/speculative_options.h"

#include "core/error.h"

namespace folio::cli {

SpeculativeConfig SpeculativeOptions::resolved() const {
  SpeculativeConfig c;
  c.num_tokens = num_tokens;
  c.ngram_min = ngram_min;
  c.ngram_max = ngram_max;
  c.adaptive = policy == "adaptive";
  if (method.empty() || method == "none") return c;
  if (method == "ngram") {
    c.method = SpeculativeConfig::Method::kNgram;
  } else if (method.rfind("draft:", 0) == 0 && method.size() > 6) {
    c.method = SpeculativeConfig::Method::kDraft;
    c.draft_model_path = method.substr(6);
  } else {
    fail("--speculative \"{}\" is not understood; use ngram or draft:PATH_TO_DRAFT_MODEL.gguf", method);
  }
  return c;
}

void add_speculative_options(CLI::App* cmd, SpeculativeOptions& o) {
  cmd->add_option("--speculative", o.method,
                  "Speculative decoding: ngram (prompt lookup) or draft:PATH (a small model with the same vocabulary)");
  cmd->add_option("--num-speculative-tokens", o.num_tokens,
                  "The most tokens proposed per step (1 to 16); the exact number under --speculative-policy fixed")
      ->check(CLI::Range(1, 16));
  cmd->add_option("--speculative-policy", o.policy,
                  "adaptive: each step proposes as many tokens as measured costs and acceptance make pay, none "
                  "included; fixed: always --num-speculative-tokens")
      ->check(CLI::IsMember({"adaptive", "fixed"}));
  cmd->add_option("--ngram-min", o.ngram_min, "Shortest n-gram looked up")->check(CLI::Range(1, 16));
  cmd->add_option("--ngram-max", o.ngram_max, "Longest n-gram looked up")->check(CLI::Range(1, 16));
}

}  // namespace folio::cli
