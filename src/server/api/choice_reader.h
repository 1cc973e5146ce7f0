// ChoiceReader: one chat choice's output as it streams, read into content,
// reasoning and tool calls: the reasoning parser first (when the job splits
// out <think> text), then the tool-call parser on the answer after it (when
// the job reads calls); or, for a template in the harmony format (gpt-oss),
// the harmony parser alone, which reads its channels and calls. Every API
// surface (chat completions, messages, responses) shapes the same events.
#pragma once

#include <optional>
#include <vector>

#include "engine/request_output.h"
#include "server/api/generation_job.h"
#include "server/api/harmony_parser.h"
#include "server/api/reasoning.h"
#include "server/api/tool_call_parser.h"

namespace folio::server {

class ChoiceReader {
 public:
  explicit ChoiceReader(const GenerationJob& job);

  // The events of one delta; at its finish, what the parsers held back too.
  std::vector<OutputEvent> read(const CompletionDelta& delta);
  int num_calls() const { return harmony_ ? harmony_->num_calls() : tools_ ? tools_->num_calls() : 0; }
  // The finish reason as OpenAI words it: "tool_calls" when a call was made
  // and the model stopped by itself.
  std::string finish_name(FinishReason reason) const;

 private:
  std::optional<ReasoningParser> reasoning_;
  std::optional<ToolCallParser> tools_;
  std::optional<HarmonyParser> harmony_;
};

}  // namespace folio::server
