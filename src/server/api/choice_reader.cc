#include "server/api/choice_reader.h"

namespace folio::server {

ChoiceReader::ChoiceReader(const GenerationJob& job) {
  if (job.harmony) {
    harmony_.emplace();
    return;
  }
  if (job.reasoning) reasoning_.emplace(job.reasoning_starts_inside);
  if (job.parses_tool_calls()) tools_.emplace(job.tool_format, &*job.tools);
}

std::vector<OutputEvent> ChoiceReader::read(const CompletionDelta& delta) {
  if (harmony_) {
    std::vector<OutputEvent> events = harmony_->feed(delta.text);
    if (delta.finish_reason)
      for (OutputEvent& e : harmony_->finish()) events.push_back(std::move(e));
    return events;
  }
  // Reasoning first: the answer after it is what may call tools.
  std::vector<ReasoningParser::Piece> pieces;
  if (!reasoning_) {
    pieces.push_back({false, delta.text});
  } else {
    pieces = reasoning_->feed(delta.text);
    if (delta.finish_reason)
      for (ReasoningParser::Piece& p : reasoning_->finish()) pieces.push_back(std::move(p));
  }
  std::vector<OutputEvent> events;
  for (ReasoningParser::Piece& p : pieces) {
    if (p.text.empty()) continue;
    if (p.reasoning) {
      events.push_back({OutputEvent::Kind::kReasoning, 0, std::move(p.text), {}});
    } else if (!tools_) {
      events.push_back({OutputEvent::Kind::kContent, 0, std::move(p.text), {}});
    } else {
      for (OutputEvent& e : tools_->feed(p.text)) events.push_back(std::move(e));
    }
  }
  if (delta.finish_reason && tools_)
    for (OutputEvent& e : tools_->finish()) events.push_back(std::move(e));
  return events;
}

std::string ChoiceReader::finish_name(FinishReason reason) const {
  if (reason == FinishReason::kStop && num_calls() > 0) return "tool_calls";
  return finish_reason_name(reason);
}

}  // namespace folio::server
