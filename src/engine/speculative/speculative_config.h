// SpeculativeConfig: the server-wide choice of speculative decoding.
#pragma once

#include <string>

namespace folio {

// Speculative decoding: a proposer guesses up to num_tokens next tokens of
// each decoding sequence and the target checks them in the normal step.
struct SpeculativeConfig {
  enum class Method { kNone, kNgram, kDraft };
  Method method = Method::kNone;
  int num_tokens = 4;              // proposals per step (k), at most
  // Choose each step's number of proposals (num_tokens at most, none
  // included) from measured step costs and acceptance; false: always num_tokens.
  bool adaptive = true;
  int ngram_min = 2;               // n-gram lookup: shortest and longest n tried (a one-token
                                   // match proposes too often in vain: bench/RESULTS.md)
  int ngram_max = 4;
  std::string draft_model_path;    // kDraft: a smaller model with the same vocabulary
};

}  // namespace folio
