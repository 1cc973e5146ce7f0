// The API mapping without a server: OpenAI chat, Anthropic Messages and
// Responses bodies read into one ChatRequest and made into the engine's job on
// a real model's tokenizer and chat template; the same conversation asked
// through each API gives the same prompt and parameters; bad fields are 400s
// that name the field; and the answer shapes write what each API's clients read.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "engine/constraint/constraint_compiler.h"
#include "model/gguf_file.h"
#include "server/api/anthropic_messages.h"
#include "server/api/api_error.h"
#include "server/api/chat_request.h"
#include "server/api/choice_reader.h"
#include "server/api/completion_request.h"
#include "server/api/generation_call.h"
#include "server/api/openai_response.h"
#include "server/api/responses_api.h"
#include "support/test_models.h"

namespace folio::server {
namespace {

class ApiMappingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FOLIO_REQUIRE_MODEL(path, testing::kQwen05B);  // a template that writes <tool_call> blocks
    GgufFile gguf = GgufFile::open(path);
    tokenizer_ = Tokenizer::create(Vocab::from_gguf(gguf));
    template_ = std::make_unique<ChatTemplate>(ChatTemplate::from_gguf(gguf));
    vocab_size_ = static_cast<std::int64_t>(tokenizer_->vocab().size());
    constraints_ = std::make_unique<ConstraintCompiler>(*tokenizer_, vocab_size_);
    model_.tokenizer = tokenizer_.get();
    model_.chat_template = template_.get();
    model_.vocab_size = vocab_size_;
    model_.max_model_len = 4096;
    model_.served_model_name = "m";
    model_.constraints = constraints_.get();
    model_.tool_format = tool_format_of(template_->source());
  }

  GenerationJob chat(const std::string& body) { return make_chat_job(read_chat_completion(parse(body)), model_); }
  GenerationJob messages(const std::string& body) {
    return make_chat_job(read_messages_request(parse(body)), model_);
  }
  GenerationJob responses(const std::string& body) {
    return make_chat_job(read_responses_request(parse(body)), model_);
  }
  GenerationJob completion(const std::string& body) { return read_completion_request(parse(body), model_); }
  static Json parse(const std::string& body) { return parse_json_object(body); }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> template_;
  std::unique_ptr<ConstraintCompiler> constraints_;
  std::int64_t vocab_size_ = 0;
  ModelContext model_;
};

// What a job must agree on whichever API made it.
void expect_same_job(const GenerationJob& a, const GenerationJob& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.prompts, b.prompts);
  EXPECT_EQ(a.params.max_tokens, b.params.max_tokens);
  EXPECT_EQ(a.params.temperature, b.params.temperature);
  EXPECT_EQ(a.params.top_p, b.params.top_p);
  EXPECT_EQ(a.params.seed, b.params.seed);
  EXPECT_EQ(a.params.stop, b.params.stop);
  EXPECT_EQ(a.stream, b.stream);
  EXPECT_EQ(a.tools.has_value(), b.tools.has_value());
  if (a.tools && b.tools) {
    EXPECT_EQ(dump_json(a.tools->definitions), dump_json(b.tools->definitions));
    EXPECT_EQ(a.tools->choice, b.tools->choice);
  }
  EXPECT_EQ(a.params.constraint != nullptr, b.params.constraint != nullptr);
}

TEST_F(ApiMappingTest, OneConversationThroughThreeApisIsOneJob) {
  const GenerationJob c = chat(R"({"model": "m", "messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi"}], "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "seed": 3,
      "stop": ["END"], "stream": true})");
  const GenerationJob m = messages(R"({"model": "m", "system": "Be brief.", "messages": [{"role": "user",
      "content": [{"type": "text", "text": "Hi"}]}], "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "seed": 3,
      "stop_sequences": ["END"], "stream": true})");
  const GenerationJob r = responses(R"({"model": "m", "instructions": "Be brief.", "input": "Hi",
      "max_output_tokens": 7, "temperature": 0.5, "top_p": 0.9, "seed": 3, "stop": ["END"], "stream": true})");
  expect_same_job(c, m, "messages");
  expect_same_job(c, r, "responses");
  EXPECT_EQ(tokenizer_->decode(c.prompts.at(0), true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(c.params.max_tokens, 7);
  EXPECT_EQ(c.params.stop, std::vector<std::string>{"END"});
}

TEST_F(ApiMappingTest, ToolTurnsThroughThreeApisAreOneJob) {
  const std::string schema = R"({"type": "object", "properties": {"city": {"type": "string"}}})";
  const GenerationJob c = chat(R"({"messages": [{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get", "arguments": "{\"city\": \"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
      "tools": [{"type": "function", "function": {"name": "get", "description": "d", "parameters": )" +
                               schema + R"(}}], "tool_choice": "required", "max_tokens": 20})");
  const GenerationJob m = messages(R"({"messages": [{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "get", "input": {"city": "Oslo"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "sunny"}]}],
      "tools": [{"name": "get", "description": "d", "input_schema": )" +
                                   schema + R"(}], "tool_choice": {"type": "any"}, "max_tokens": 20})");
  const GenerationJob r = responses(R"({"input": [{"role": "user", "content": "Weather?"},
      {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{\"city\": \"Oslo\"}"},
      {"type": "function_call_output", "call_id": "c1", "output": "sunny"}],
      "tools": [{"type": "function", "name": "get", "description": "d", "parameters": )" +
                                    schema + R"(}], "tool_choice": "required", "max_output_tokens": 20})");
  expect_same_job(c, m, "messages");
  expect_same_job(c, r, "responses");
  ASSERT_TRUE(c.tools);
  EXPECT_EQ(c.tools->choice, ToolRequest::Choice::kRequired);
  EXPECT_NE(c.params.constraint, nullptr);  // a forced call is a grammar
  const std::string text = tokenizer_->decode(c.prompts.at(0), true);
  EXPECT_NE(text.find(R"({"name": "get", "arguments": {"city": "Oslo"}})"), std::string::npos) << text;
  EXPECT_NE(text.find("<tool_response>\nsunny\n</tool_response>"), std::string::npos) << text;
}

TEST_F(ApiMappingTest, SchemasKeepTheirWrittenKeyOrder) {
  const GenerationJob c = chat(R"({"messages": [{"role": "user", "content": "x"}], "response_format":
      {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object", "properties":
      {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}, "required": ["zeta", "alpha"]}}}})");
  ASSERT_NE(c.params.constraint, nullptr);
  const GenerationJob r = responses(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "s",
      "schema": {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}},
      "required": ["zeta", "alpha"]}}}})");
  ASSERT_NE(r.params.constraint, nullptr);
  const GenerationJob t = chat(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function",
      "function": {"name": "f", "parameters": {"type": "object", "properties": {"zeta": {}, "alpha": {}}}}}]})");
  ASSERT_TRUE(t.tools);
  EXPECT_EQ(dump_json(t.tools->parameters.at(0)["properties"]), R"({"zeta":{},"alpha":{}})");
}

struct Refusal {
  const char* api;  // chat, messages, responses, completions
  const char* body;
  int status;
  const char* param;
  const char* words;  // a piece of the message
};

class ApiRefusalTest : public ApiMappingTest, public ::testing::WithParamInterface<Refusal> {};

TEST_P(ApiRefusalTest, IsAnErrorNamingTheField) {
  const Refusal& c = GetParam();
  const std::string api = c.api;
  try {
    if (api == "chat") chat(c.body);
    if (api == "messages") messages(c.body);
    if (api == "responses") responses(c.body);
    if (api == "completions") completion(c.body);
    ADD_FAILURE() << "accepted: " << c.body;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), c.status) << e.what();
    EXPECT_EQ(e.param(), c.param) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.words), std::string::npos) << e.what();
  }
}

constexpr const char* kUser = R"("messages": [{"role": "user", "content": "hi"}])";

// Each refusal once, in its single wording (SamplingParams::validate's for ranges).
const Refusal kRefusals[] = {
    {"chat", R"({"model": "other", "messages": [{"role": "user", "content": "hi"}]})", 404, "model", "does not exist"},
    {"chat", R"({"messages": []})", 400, "messages", "non-empty array"},
    {"chat", R"({"messages": [{"role": "wizard", "content": "hi"}]})", 400, "messages", "is not supported"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0})", 400, "max_tokens",
     "max_tokens = 0 is out of range"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": -1})", 400,
     "max_completion_tokens", "max_tokens = -1 is out of range"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 21})", 400,
     "top_logprobs", "logprobs = 21 is out of range"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "temperature": -1})", 400, "temperature",
     "temperature = -1 is out of range"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"})", 400, "temperature",
     "must be a number"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"999999": 1}})", 400, "logit_bias",
     "not in the vocabulary"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "stop_token_ids": [-1]})", 400, "stop_token_ids",
     "not a token id"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "n": 100})", 400, "n", "this server allows 1 to"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 3})", 400, "top_logprobs",
     "needs logprobs"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": true}})", 400,
     "stream_options", "only allowed when stream"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"},
        "guided_regex": "a+"})",
     400, "guided_regex", "both constrain"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"messages": 1}})", 400,
     "chat_template_kwargs", "may not set"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "a": 1, "a": 2})", 400, "", "repeats the key"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "extreme"})", 400,
     "reasoning_effort", "must be one of"},
    {"chat", R"({"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": 3})", 400, "reasoning_effort",
     "must be one of"},
    {"chat", R"({"messages": [{"role": "assistant", "content": "x", "reasoning_content": 1}]})", 400, "messages",
     "reasoning_content must be a string"},
    {"messages", R"({"messages": [{"role": "user", "content": "hi"}]})", 400, "max_tokens", "max_tokens is required"},
    {"messages", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "n": 2})", 400, "n",
     "one answer per request"},
    {"messages", R"({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}], "max_tokens": 5})",
     400, "messages", "are not supported"},
    {"messages", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
        "tool_choice": {"type": "sometimes"}})",
     400, "tool_choice", "is not auto, any, tool or none"},
    {"responses", R"({"input": "hi", "previous_response_id": "r"})", 400, "previous_response_id", "not stored"},
    {"responses", R"({"input": []})", 400, "input", "non-empty array"},
    {"responses", R"({"input": "hi", "reasoning": {"effort": "max"}})", 400, "reasoning.effort", "must be one of"},
    {"responses", R"({"input": "hi", "text": {"format": {"type": "yaml"}}})", 400, "text", "text.format.type"},
    {"responses", R"({"input": "hi", "max_output_tokens": 0})", 400, "max_output_tokens",
     "max_tokens = 0 is out of range"},
    {"completions", R"({"prompt": ""})", 400, "prompt", "empty string"},
    {"completions", R"({"prompt": [1, 2, 99999999]})", 400, "prompt", "outside the vocabulary"},
    {"completions", R"({"prompt": "hi", "best_of": 3})", 400, "best_of", "not supported"},
};

INSTANTIATE_TEST_SUITE_P(Api, ApiRefusalTest, ::testing::ValuesIn(kRefusals));

// OpenAI's reasoning effort reaches the template as `reasoning_effort`:
// gpt-oss's harmony template writes it into its system message; a
// chat_template_kwargs reasoning_effort wins; without one the template's own
// default (medium) stays.
TEST_F(ApiMappingTest, ReasoningEffortReachesTheTemplate) {
  std::ifstream in(testing::source_path("tests/data/chat_templates/gpt-oss.jinja"), std::ios::binary);
  ASSERT_TRUE(in.good());
  const ChatTemplate gpt_oss{std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())};
  model_.chat_template = &gpt_oss;
  auto system_of = [&](const GenerationJob& job) {
    const std::string text = tokenizer_->decode(job.prompts.at(0), true);
    const std::size_t at = text.find("Reasoning: ");
    return at == std::string::npos ? std::string() : text.substr(at, text.find('\n', at) - at);
  };
  EXPECT_EQ(system_of(chat(std::string("{") + kUser + "}")), "Reasoning: medium");
  EXPECT_EQ(system_of(chat(std::string("{") + kUser + R"(, "reasoning_effort": "high"})")), "Reasoning: high");
  EXPECT_EQ(system_of(chat(std::string("{") + kUser +
                           R"(, "reasoning_effort": "high", "chat_template_kwargs": {"reasoning_effort": "low"}})")),
            "Reasoning: low");
  EXPECT_EQ(system_of(responses(R"({"input": "hi", "reasoning": {"effort": "low"}})")), "Reasoning: low");
}

// A harmony template (gpt-oss) makes harmony jobs: control tokens stay in
// the text, and the choice reader takes the channels and calls out of it;
// a forced tool call, which folio cannot constrain in harmony yet, is a 400.
TEST_F(ApiMappingTest, HarmonyTemplateJobsReadChannelsAndCalls) {
  std::ifstream in(testing::source_path("tests/data/chat_templates/gpt-oss.jinja"), std::ios::binary);
  ASSERT_TRUE(in.good());
  const ChatTemplate gpt_oss{std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())};
  model_.chat_template = &gpt_oss;
  model_.tool_format = tool_format_of(gpt_oss.source());
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";
  const GenerationJob job = chat(std::string("{") + kUser + ", " + tools + "}");
  EXPECT_TRUE(job.harmony);
  EXPECT_FALSE(job.params.skip_special_tokens);
  EXPECT_FALSE(job.reasoning);
  EXPECT_EQ(job.params.constraint, nullptr);
  ChoiceReader reader(job);
  CompletionDelta delta;
  delta.text = "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}";
  delta.finish_reason = FinishReason::kStop;
  const std::vector<OutputEvent> events = reader.read(delta);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, OutputEvent::Kind::kReasoning);
  EXPECT_EQ(events[0].text, "Call it.");
  EXPECT_EQ(events[1].kind, OutputEvent::Kind::kCallStart);
  EXPECT_EQ(events[1].text, "get_weather");
  EXPECT_EQ(events[2].text, "{\"city\": \"Oslo\"}");
  EXPECT_EQ(reader.finish_name(FinishReason::kStop), "tool_calls");
  try {
    chat(std::string("{") + kUser + ", " + tools + R"(, "tool_choice": "required"})");
    ADD_FAILURE() << "a forced call was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "tool_choice");
    EXPECT_NE(std::string(e.what()).find("harmony"), std::string::npos) << e.what();
  }
}

// An assistant's reasoning_content reaches the template as `thinking`: the
// gpt-oss template keeps the analysis of a turn that called a tool.
TEST_F(ApiMappingTest, EarlierReasoningOfAToolCallReachesTheHarmonyTemplate) {
  std::ifstream in(testing::source_path("tests/data/chat_templates/gpt-oss.jinja"), std::ios::binary);
  ASSERT_TRUE(in.good());
  const ChatTemplate gpt_oss{std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())};
  model_.chat_template = &gpt_oss;
  model_.tool_format = tool_format_of(gpt_oss.source());
  const GenerationJob job = chat(R"({"messages": [
      {"role": "user", "content": "Weather in Oslo?"},
      {"role": "assistant", "content": null, "reasoning_content": "I should call get_weather.",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]})");
  const std::string prompt = tokenizer_->decode(job.prompts.at(0), true);
  const std::string kept =
      "<|start|>assistant<|channel|>analysis<|message|>I should call get_weather.<|end|>"
      "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>";
  EXPECT_NE(prompt.find(kept), std::string::npos) << prompt;
  // The Responses API: a reasoning item before the call it led to.
  const GenerationJob r = responses(R"({"input": [
      {"role": "user", "content": "Weather in Oslo?"},
      {"type": "reasoning", "id": "rs_1", "summary": [],
       "content": [{"type": "reasoning_text", "text": "I should call get_weather."}]},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}],
      "tools": [{"type": "function", "name": "get_weather", "description": "Weather.",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]})");
  const std::string r_prompt = tokenizer_->decode(r.prompts.at(0), true);
  EXPECT_NE(r_prompt.find(kept), std::string::npos) << r_prompt;
  EXPECT_EQ(r_prompt, prompt);
  // Anthropic's Messages API: a thinking block beside the tool_use.
  const GenerationJob a = messages(R"({"max_tokens": 50, "messages": [
      {"role": "user", "content": "Weather in Oslo?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "I should call get_weather.", "signature": "s"},
          {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"}]}],
      "tools": [{"name": "get_weather", "description": "Weather.",
                 "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]})");
  const std::string a_prompt = tokenizer_->decode(a.prompts.at(0), true);
  EXPECT_NE(a_prompt.find(kept), std::string::npos) << a_prompt;
}

TEST_F(ApiMappingTest, AnOverlongPromptSaysContextLengthExceeded) {
  model_.max_model_len = 8;
  for (const char* api : {"chat", "completions"}) {
    try {
      if (std::string(api) == "chat") chat(std::string("{") + kUser + "}");
      if (std::string(api) == "completions") completion(R"({"prompt": "one two three four five six seven eight"})");
      ADD_FAILURE() << api << " accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.code(), "context_length_exceeded") << e.what();
      EXPECT_EQ(e.param(), std::string(api) == "chat" ? "messages" : "prompt");
      EXPECT_NE(std::string(e.what()).find("shorten the prompt"), std::string::npos) << e.what();
    }
  }
}

TEST_F(ApiMappingTest, CompletionPromptsOfEveryShape) {
  EXPECT_EQ(completion(R"({"prompt": "Hello"})").prompts.size(), 1u);
  EXPECT_EQ(completion(R"({"prompt": ["a", "b"], "n": 2})").num_choices(), 4);
  EXPECT_EQ(completion(R"({"prompt": [1, 2, 3]})").prompts.at(0), (std::vector<TokenId>{1, 2, 3}));
  EXPECT_EQ(completion(R"({"prompt": [[1], [2, 3]]})").prompts.size(), 2u);
  EXPECT_EQ(completion(R"({"prompt": "x"})").params.max_tokens, 16);  // OpenAI's default
  const GenerationJob echo = completion(R"({"prompt": [9707], "echo": true, "logprobs": 2})");
  EXPECT_EQ(echo.echo_texts.at(0), tokenizer_->decode(std::vector<TokenId>{9707}, true));
  EXPECT_EQ(echo.params.prompt_logprobs, 2);
}

// The answer of a job that wrote "Hello" in two deltas and stopped.
CompletionDelta delta(const std::string& text, bool last) {
  CompletionDelta d;
  d.text = text;
  d.token_ids = {1};
  if (last) d.finish_reason = FinishReason::kStop;
  return d;
}

TEST_F(ApiMappingTest, EachApiShapesTheSameAnswerItsWay) {
  Usage usage;
  usage.prompt_tokens = 9;
  usage.completion_tokens = 2;
  const GenerationJob c = chat(std::string("{") + kUser + "}");
  ResponseBuilder openai(c, *tokenizer_, "m", "chatcmpl-1", 0);
  openai.add(0, delta("Hel", false));
  openai.add(0, delta("lo", true));
  const Json o = openai.response(usage);
  EXPECT_EQ(o["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(o["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(o["usage"]["total_tokens"], 11);

  const GenerationJob m = messages(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5})");
  std::unique_ptr<AnswerShape> anthropic = make_messages_shape(m, *tokenizer_, "m");
  anthropic->add(0, delta("Hel", false));
  anthropic->add(0, delta("lo", true));
  const Json a = parse_json_object(anthropic->response(usage));
  EXPECT_EQ(a["type"], "message");
  EXPECT_EQ(a["content"][0]["text"], "Hello");
  EXPECT_EQ(a["stop_reason"], "end_turn");
  EXPECT_EQ(a["usage"]["output_tokens"], 2);

  const GenerationJob r = responses(R"({"input": "hi"})");
  std::unique_ptr<AnswerShape> response = make_responses_shape(r, *tokenizer_, "m");
  response->add(0, delta("Hel", false));
  response->add(0, delta("lo", true));
  const Json x = parse_json_object(response->response(usage));
  EXPECT_EQ(x["object"], "response");
  EXPECT_EQ(x["status"], "completed");
  EXPECT_EQ(x["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(x["usage"]["output_tokens"], 2);
}

TEST_F(ApiMappingTest, AToolCallIsReadBackInEachApisShape) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get", "parameters": {}}}])";
  const GenerationJob c = chat(std::string("{") + kUser + ", " + tools + "}");
  const std::string call = "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  ResponseBuilder openai(c, *tokenizer_, "m", "chatcmpl-1", 0);
  openai.add(0, delta(call, true));
  const Json o = openai.response({});
  EXPECT_EQ(o["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(o["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get");
  EXPECT_EQ(o["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], R"({"city": "Oslo"})");

  const GenerationJob m = messages(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50,
      "tools": [{"name": "get", "input_schema": {}}]})");
  std::unique_ptr<AnswerShape> anthropic = make_messages_shape(m, *tokenizer_, "m");
  anthropic->add(0, delta(call, true));
  const Json a = parse_json_object(anthropic->response({}));
  EXPECT_EQ(a["stop_reason"], "tool_use");
  EXPECT_EQ(a["content"][0]["type"], "tool_use");
  EXPECT_EQ(dump_json(a["content"][0]["input"]), R"({"city":"Oslo"})");
}

// gpt-oss's harmony answer, streamed in pieces that cut its markers: the
// analysis is reasoning in each API's shape (reasoning_content, a thinking
// block, a reasoning item), the final channel the answer, and no piece of
// the markup reaches any stream event or any answer.
TEST_F(ApiMappingTest, AHarmonyAnswerInEachApisShape) {
  std::ifstream in(testing::source_path("tests/data/chat_templates/gpt-oss.jinja"), std::ios::binary);
  ASSERT_TRUE(in.good());
  const ChatTemplate gpt_oss{std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())};
  model_.chat_template = &gpt_oss;
  model_.tool_format = tool_format_of(gpt_oss.source());
  const std::string answer =
      "<|channel|>analysis<|message|>Simple: 4.<|end|><|start|>assistant<|channel|>final<|message|>Quatre.";
  const std::vector<std::string> pieces = {answer.substr(0, 5), answer.substr(5, 20), answer.substr(25, 24),
                                           answer.substr(49, 30), answer.substr(79)};
  auto no_markup = [](const std::string& text) {
    for (const char* m : {"<|", "|>", "channel", "analysis"})
      EXPECT_EQ(text.find(m), std::string::npos) << m << " in " << text;
  };

  const GenerationJob c = chat(std::string("{") + kUser + R"(, "stream": true})");
  ResponseBuilder openai(c, *tokenizer_, "m", "chatcmpl-1", 0);
  std::string reasoning, content;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const Json chunk = openai.chunk(0, delta(pieces[i], i + 1 == pieces.size()));
    if (chunk.is_null()) continue;  // all of it held back
    for (const Json& choice : chunk["choices"]) {
      const Json& d = choice["delta"];
      if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
      if (d.contains("content") && d["content"].is_string()) content += d["content"].get<std::string>();
    }
    no_markup(dump_json(chunk));
  }
  EXPECT_EQ(reasoning, "Simple: 4.");
  EXPECT_EQ(content, "Quatre.");
  ResponseBuilder whole(c, *tokenizer_, "m", "chatcmpl-2", 0);
  for (std::size_t i = 0; i < pieces.size(); ++i) whole.add(0, delta(pieces[i], i + 1 == pieces.size()));
  const Json o = whole.response({});
  EXPECT_EQ(o["choices"][0]["message"]["content"], "Quatre.");
  EXPECT_EQ(o["choices"][0]["message"]["reasoning_content"], "Simple: 4.");

  const GenerationJob m = messages(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50})");
  std::unique_ptr<AnswerShape> anthropic = make_messages_shape(m, *tokenizer_, "m");
  std::string events = anthropic->opening_events();
  for (std::size_t i = 0; i < pieces.size(); ++i) events += anthropic->delta_events(0, delta(pieces[i], i + 1 == pieces.size()));
  events += anthropic->closing_events({});
  no_markup(events);
  EXPECT_NE(events.find("thinking"), std::string::npos);
  std::unique_ptr<AnswerShape> anthropic_whole = make_messages_shape(m, *tokenizer_, "m");
  for (std::size_t i = 0; i < pieces.size(); ++i) anthropic_whole->add(0, delta(pieces[i], i + 1 == pieces.size()));
  const Json a = parse_json_object(anthropic_whole->response({}));
  EXPECT_EQ(a["content"][0]["type"], "thinking");
  EXPECT_EQ(a["content"][0]["thinking"], "Simple: 4.");
  EXPECT_EQ(a["content"][1]["text"], "Quatre.");

  const GenerationJob r = responses(R"({"input": "hi", "stream": true})");
  std::unique_ptr<AnswerShape> response = make_responses_shape(r, *tokenizer_, "m");
  events = response->opening_events();
  for (std::size_t i = 0; i < pieces.size(); ++i) events += response->delta_events(0, delta(pieces[i], i + 1 == pieces.size()));
  events += response->closing_events({});
  no_markup(events);
  EXPECT_NE(events.find("response.reasoning_text.delta"), std::string::npos);
  std::unique_ptr<AnswerShape> response_whole = make_responses_shape(r, *tokenizer_, "m");
  for (std::size_t i = 0; i < pieces.size(); ++i) response_whole->add(0, delta(pieces[i], i + 1 == pieces.size()));
  const Json x = parse_json_object(response_whole->response({}));
  EXPECT_EQ(x["output"][0]["type"], "reasoning");
  EXPECT_EQ(x["output"][1]["content"][0]["text"], "Quatre.");
}

}  // namespace
}  // namespace folio::server
