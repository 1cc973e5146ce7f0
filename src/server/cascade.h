// A query cascade: a served name behind which a small model answers first
// and the large one only when the small answer's own token probabilities
// say it is unsure (lossy, opt-in: folio serve --cascade). The confidence
// is read from the small answer's logprobs; which score and which threshold
// separate right from wrong best is measured by bench/cascade_eval.py.
#pragma once

#include <optional>
#include <string>

#include "server/api/json_fields.h"

namespace folio::server {

// How an answer's confidence is scored from its tokens' logprobs.
enum class CascadeMeasure {
  kMin,     // the smallest token log-probability
  kMean,    // their mean
  kMargin,  // the smallest gap between a token's top two log-probabilities
};
std::optional<CascadeMeasure> parse_cascade_measure(const std::string& text);
const char* cascade_measure_name(CascadeMeasure measure);

struct CascadeSpec {
  std::string name;   // the `model` requests name it by
  std::string small;  // served model names
  std::string large;
  double threshold = 0;  // a small answer scoring below it goes to the large model
  CascadeMeasure measure = CascadeMeasure::kMargin;
};

// "NAME=SMALL,LARGE"; throws Error on another shape.
CascadeSpec parse_cascade_spec(const std::string& text);

// The confidence of the first choice of a chat completion body that has
// logprobs (with at least two top_logprobs for kMargin); -infinity for an
// answer without tokens.
double answer_confidence(const Json& response, CascadeMeasure measure);

// The body as a client that asked for `top_logprobs` (0: no logprobs at all)
// would have it: logprobs the cascade asked for itself taken out.
void trim_logprobs(Json& response, bool asked, int top_logprobs);

// A whole chat completion body told as a stream's events, as a client that
// asked for a stream reads them: per choice an opening chunk (the role), one
// chunk with the whole message (reasoning, content, tool calls), its logprobs
// and its finish; the usage chunk when asked; then [DONE].
std::string stream_events_of(const Json& response, bool include_usage);

}  // namespace folio::server
