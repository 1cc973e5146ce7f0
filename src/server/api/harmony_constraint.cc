#include "server/api/harmony_constraint.h"

#include <fmt/format.h>

#include "server/api/json_fields.h"
#include "tokenizer/vocab.h"

namespace folio::server {
namespace {

Json token(TokenId id) { return Json{{"type", "token"}, {"token", id}}; }
Json text(const std::string& s) { return Json{{"type", "const_string"}, {"value", s}}; }
Json sequence(Json elements) { return Json{{"type", "sequence"}, {"elements", std::move(elements)}}; }

}  // namespace

std::optional<HarmonyTokens> find_harmony_tokens(const Vocab& vocab) {
  HarmonyTokens t{vocab.find("<|start|>"), vocab.find("<|channel|>"), vocab.find("<|message|>"),
                  vocab.find("<|constrain|>"), vocab.find("<|end|>")};
  for (TokenId id : {t.start, t.channel, t.message, t.constrain, t.end})
    if (id < 0) return std::nullopt;
  return t;
}

ConstraintSpec harmony_call_constraint(const ToolRequest& tools, const HarmonyTokens& ids,
                                       const std::vector<TokenId>& control) {
  // <|channel|>analysis<|message|>...<|end|><|start|>assistant, or nothing.
  Json excluded = Json::array();
  for (TokenId id : control)
    if (id != ids.end) excluded.push_back(id);
  const Json thought = sequence(Json::array(
      {token(ids.channel), text("analysis"),
       Json{{"type", "tag"},
            {"begin", token(ids.message)},
            {"content", {{"type", "any_tokens"}, {"exclude_tokens", std::move(excluded)}}},
            {"end", token(ids.end)}},
       token(ids.start), text("assistant")}));
  Json calls = Json::array();
  for (std::size_t i = 0; i < tools.names.size(); ++i) {
    if (tools.choice == ToolRequest::Choice::kFunction && tools.names[i] != tools.function) continue;
    // valid_tool_name: a name needs no escaping.
    calls.push_back(Json{{"type", "tag"},
                         {"begin", fmt::format("commentary to=functions.{} ", tools.names[i])},
                         {"content", sequence(Json::array({token(ids.constrain), text("json"), token(ids.message),
                                                           tool_arguments_format(tools.parameters[i])}))},
                         {"end", ""}});
  }
  const Json call = Json{{"type", "tags_with_separator"},
                         {"tags", std::move(calls)},
                         {"separator", ""},
                         {"at_least_one", true},
                         {"stop_after_first", true}};
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::kStructuralTag;
  spec.text = dump_json(Json{
      {"type", "structural_tag"},
      {"format", sequence(Json::array({Json{{"type", "optional"}, {"content", thought}}, token(ids.channel), call}))}});
  return spec;
}

}  // namespace folio::server
