// The grammar that forces a tool call in the harmony format (gpt-oss's): the
// model may first think in one analysis message, then writes one call,
// <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...},
// whose arguments fit NAME's schema, and ends its turn. Harmony's markers
// are control tokens, which no text spells: the grammar names them by id.
// A harmony turn ends at its call (<|call|>), so it holds one call, whatever
// parallel_tool_calls says.
#pragma once

#include <optional>

#include "core/ids.h"
#include "engine/constraint/constraint_compiler.h"
#include "server/api/tool_calls.h"

namespace folio {
struct Vocab;
}

namespace folio::server {

struct HarmonyTokens {
  TokenId start = -1;      // <|start|>
  TokenId channel = -1;    // <|channel|>
  TokenId message = -1;    // <|message|>
  TokenId constrain = -1;  // <|constrain|>
  TokenId end = -1;        // <|end|>
};

// nullopt when the vocabulary lacks one of them.
std::optional<HarmonyTokens> find_harmony_tokens(const Vocab& vocab);

// tools.choice forces a call (required, or a named function). `control`:
// every control token of the vocabulary, kept out of the thinking's text.
ConstraintSpec harmony_call_constraint(const ToolRequest& tools, const HarmonyTokens& ids,
                                       const std::vector<TokenId>& control);

}  // namespace folio::server
