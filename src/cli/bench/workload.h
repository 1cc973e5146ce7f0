// BenchWorkload: the requests `folio bench` sends - prompts of random token
// ids, output lengths and arrival times - generated from a seed alone, so that
// folio, a server and the llama.cpp peer all get exactly the same workload on
// every machine (no std:: distribution, whose algorithms differ by library).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace folio::cli {

struct BenchRequest {
  std::vector<TokenId> prompt;
  int output_len = 0;     // tokens to generate, exactly (end-of-generation ignored)
  double arrival_s = 0;   // when to send it, from the start of the run
  // Random-token prompts have no natural end: they generate output_len tokens
  // exactly. Text prompts stop at end-of-generation, output_len at most.
  bool ignore_eos = true;
  bool speculative = true;  // may use the engine's speculative decoding
  bool constrained = false;  // its output follows the run's JSON schema (--json-schema)
};

struct BenchWorkload {
  std::vector<BenchRequest> requests;

  std::int64_t prompt_tokens() const;
  std::int64_t output_tokens() const;
  int max_seq_len() const;  // longest prompt plus output
};

struct WorkloadOptions {
  // random: fixed lengths; mix: chat-like length mix; anything else names a
  // text dataset (read_text_prompts).
  std::string dataset = "random";
  int num_prompts = 32;
  int input_len = 128;             // random only
  int output_len = 128;            // random: exactly; text datasets: at most
  std::uint64_t seed = 0;
  // Requests per second with Poisson arrivals; infinity sends all at once.
  double request_rate = std::numeric_limits<double>::infinity();
};

// The token ids prompts are drawn from: the vocab's normal tokens (no
// control, byte or unused ids, which some servers refuse in a prompt).
std::vector<TokenId> prompt_token_pool(const Vocab& vocab);

// The workload for `options`; token ids are drawn uniformly from `pool`.
// Throws Error for a dataset it does not know or lengths out of range.
BenchWorkload make_workload(const WorkloadOptions& options, const std::vector<TokenId>& pool);

// One prompt of a text dataset: chat messages (rendered with the model's chat
// template) or plain text.
struct TextPrompt {
  std::string id;
  nlohmann::ordered_json messages;  // null when the prompt is plain text
  std::string text;
};

// A text dataset, JSON Lines: one object per line with "messages" (OpenAI
// chat messages) or "prompt" (text), and an optional "id". The names
// "grounded" and "chat" are the sets in bench/prompts/. Throws Error with the
// line number for a line it cannot use.
std::vector<TextPrompt> read_text_prompts(const std::string& dataset);

// num_prompts requests from `prompts` in file order (cycling when there are
// fewer), starting at prompt seed % size so that repetitions differ; each
// stops at end-of-generation or after output_len tokens.
BenchWorkload make_text_workload(const WorkloadOptions& options, const std::vector<TextPrompt>& prompts,
                                 const std::function<std::vector<TokenId>(const TextPrompt&)>& encode);

// Whether `dataset` names a text dataset rather than random token ids.
bool is_text_dataset(const std::string& dataset);

}  // namespace folio::cli
