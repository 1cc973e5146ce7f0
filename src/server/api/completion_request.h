// POST /v1/completions: a prompt (a string, token ids, or a list of either)
// read, tokenized and checked against the served model into the engine's job.
#pragma once

#include <string>
#include <vector>

#include "server/api/generation_job.h"

namespace folio::server {

GenerationJob read_completion_request(const Json& body, const ModelContext& model);

// A completions prompt string, tokenized as POST /v1/completions does.
std::vector<TokenId> tokenize_text(const std::string& text, const ModelContext& model, bool add_special_tokens);

}  // namespace folio::server
