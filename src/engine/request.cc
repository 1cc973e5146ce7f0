#include "engine/request.h"

#include <fmt/format.h>

namespace folio {

std::optional<RequestProblem> check_request(const std::vector<TokenId>& prompt, const SamplingParams& p,
                                            std::int64_t vocab_size, int max_model_len) {
  using Kind = RequestProblem::Kind;
  if (prompt.empty()) return RequestProblem{Kind::kPrompt, "", "the prompt is empty; give at least one token"};
  for (TokenId id : prompt)
    if (id < 0 || id >= vocab_size)
      return RequestProblem{Kind::kPrompt, "",
                            fmt::format("the prompt holds token id {}, which is outside the vocabulary: ids must "
                                        "be in [0, {}]",
                                        id, vocab_size - 1)};
  if (static_cast<std::int64_t>(prompt.size()) >= max_model_len)
    // OpenAI's words for it, which clients match (litellm's context-window fallback does).
    return RequestProblem{Kind::kContextLength, "",
                          fmt::format("this model's maximum context length is {} tokens, and the prompt has {} "
                                      "(prompt and answer share the context); shorten the prompt, or start the "
                                      "server with a larger --max-model-len",
                                      max_model_len, prompt.size())};
  if (auto problem = p.validate(vocab_size)) return RequestProblem{Kind::kParam, problem->param, problem->message};
  if (p.constraint && p.constraint->vocab_size() != vocab_size)
    return RequestProblem{Kind::kParam, "",
                          fmt::format("the output constraint was compiled for {} tokens but the model scores {}; "
                                      "compile it with this model's ConstraintCompiler",
                                      p.constraint->vocab_size(), vocab_size)};
  return std::nullopt;
}

}  // namespace folio
