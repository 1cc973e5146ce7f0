#include "server/cascade.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace folio::server {

std::optional<CascadeMeasure> parse_cascade_measure(const std::string& text) {
  if (text == "min") return CascadeMeasure::kMin;
  if (text == "mean") return CascadeMeasure::kMean;
  if (text == "margin") return CascadeMeasure::kMargin;
  return std::nullopt;
}

const char* cascade_measure_name(CascadeMeasure measure) {
  switch (measure) {
    case CascadeMeasure::kMin:
      return "min";
    case CascadeMeasure::kMean:
      return "mean";
    case CascadeMeasure::kMargin:
      return "margin";
  }
  return "min";
}

CascadeSpec parse_cascade_spec(const std::string& text) {
  const std::size_t eq = text.find('=');
  const std::size_t comma = text.find(',', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || eq == 0 || comma == std::string::npos || comma == eq + 1 || comma + 1 >= text.size() ||
      text.find(',', comma + 1) != std::string::npos)
    fail("--cascade \"{}\": write it as NAME=SMALL,LARGE, with SMALL and LARGE served model names", text);
  CascadeSpec spec;
  spec.name = text.substr(0, eq);
  spec.small = text.substr(eq + 1, comma - eq - 1);
  spec.large = text.substr(comma + 1);
  return spec;
}

double answer_confidence(const Json& response, CascadeMeasure measure) {
  const Json* choices = field_of(response, "choices");
  if (choices == nullptr || !choices->is_array() || choices->empty()) return -std::numeric_limits<double>::infinity();
  const Json* logprobs = field_of((*choices)[0], "logprobs");
  const Json* content = logprobs != nullptr && logprobs->is_object() ? field_of(*logprobs, "content") : nullptr;
  if (content == nullptr || !content->is_array() || content->empty()) return -std::numeric_limits<double>::infinity();
  double sum = 0, lowest = std::numeric_limits<double>::infinity();
  for (const Json& token : *content) {
    const double lp = token.at("logprob").get<double>();
    if (measure == CascadeMeasure::kMargin) {
      std::vector<double> tops;
      if (const Json* t = field_of(token, "top_logprobs"); t != nullptr && t->is_array())
        for (const Json& alt : *t) tops.push_back(alt.at("logprob").get<double>());
      std::sort(tops.rbegin(), tops.rend());
      lowest = std::min(lowest, tops.size() >= 2 ? tops[0] - tops[1] : 0.0);
    } else {
      sum += lp;
      lowest = std::min(lowest, lp);
    }
  }
  return measure == CascadeMeasure::kMean ? sum / static_cast<double>(content->size()) : lowest;
}

void trim_logprobs(Json& response, bool asked, int top_logprobs) {
  Json* choices = response.contains("choices") ? &response["choices"] : nullptr;
  if (choices == nullptr || !choices->is_array()) return;
  for (Json& choice : *choices) {
    if (!asked) {
      choice["logprobs"] = nullptr;
      continue;
    }
    if (!choice.contains("logprobs") || !choice["logprobs"].is_object()) continue;
    Json& content = choice["logprobs"]["content"];
    if (!content.is_array()) continue;
    for (Json& token : content)
      if (token.contains("top_logprobs") && token["top_logprobs"].is_array() &&
          token["top_logprobs"].size() > static_cast<std::size_t>(top_logprobs))
        token["top_logprobs"].erase(token["top_logprobs"].begin() + top_logprobs, token["top_logprobs"].end());
  }
}

std::string stream_events_of(const Json& response, bool include_usage) {
  const auto field = [&response](const char* name) { return response.contains(name) ? response[name] : Json(nullptr); };
  const auto envelope = [&] {
    return Json{{"id", field("id")},
                {"object", "chat.completion.chunk"},
                {"created", field("created")},
                {"model", field("model")},
                {"system_fingerprint", field("system_fingerprint")}};
  };
  std::string out;
  const auto event = [&out, include_usage](Json chunk, bool usage_slot) {
    if (usage_slot && include_usage) chunk["usage"] = nullptr;
    out += "data: " + dump_json(chunk) + "\n\n";
  };
  const Json choices = field("choices");
  for (const Json& choice : choices.is_array() ? choices : Json::array()) {
    const Json index = choice.contains("index") ? choice["index"] : Json(0);
    Json opening = envelope();
    opening["choices"] = Json::array(
        {Json{{"index", index}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
              {"finish_reason", nullptr}}});
    event(std::move(opening), true);
    // The whole message in one delta, with its logprobs and its end.
    const Json message = choice.contains("message") ? choice["message"] : Json::object();
    Json delta = Json::object();
    for (const char* name : {"reasoning_content", "content"})
      if (message.contains(name) && message[name].is_string() && !message[name].get_ref<const std::string&>().empty())
        delta[name] = message[name];
    if (message.contains("tool_calls") && message["tool_calls"].is_array() && !message["tool_calls"].empty()) {
      Json calls = Json::array();
      for (const Json& call : message["tool_calls"]) {
        Json c = call;
        c["index"] = calls.size();
        calls.push_back(std::move(c));
      }
      delta["tool_calls"] = std::move(calls);
    }
    Json body = envelope();
    body["choices"] = Json::array({Json{{"index", index},
                                        {"delta", std::move(delta)},
                                        {"logprobs", choice.contains("logprobs") ? choice["logprobs"] : Json(nullptr)},
                                        {"finish_reason", choice.contains("finish_reason") ? choice["finish_reason"] : Json(nullptr)}}});
    if (choice.contains("stop_reason")) body["choices"][0]["stop_reason"] = choice["stop_reason"];
    event(std::move(body), true);
  }
  if (include_usage) {
    Json usage = envelope();
    usage["choices"] = Json::array();
    usage["usage"] = field("usage");
    event(std::move(usage), false);
  }
  return out + "data: [DONE]\n\n";
}

}  // namespace folio::server
