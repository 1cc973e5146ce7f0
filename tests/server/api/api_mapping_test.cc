// The API mapping without a server: OpenAI chat, Anthropic Messages and
// Responses bodies read into one ChatRequest and made into the engine's job on
// a real model's tokenizer and chat template; the same conversation asked
// through each API gives the same prompt and parameters; bad fields are 400s
// that name the field; and the answer shapes write what each API's clients read.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
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
    served_.model_name = "m";
    served_.system_fingerprint = "fp_0123456789abcdef";
  }

  GenerationJob chat(const std::string& body) { return make_chat_job(read_chat_completion(parse(body)), model_); }
  GenerationJob messages(const std::string& body) {
    return make_chat_job(read_messages_request(parse(body)), model_);
  }
  // As the server reads one: the request, then what it asks of the store.
  GenerationJob responses(const std::string& body) {
    const Json json = parse(body);
    ChatRequest r = read_responses_request(json);
    continue_stored(stored_, read_response_storage(json), r);
    return make_chat_job(std::move(r), model_);
  }
  GenerationJob completion(const std::string& body) { return read_completion_request(parse(body), model_); }
  static Json parse(const std::string& body) { return parse_json_object(body); }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> template_;
  std::unique_ptr<ConstraintCompiler> constraints_;
  std::int64_t vocab_size_ = 0;
  ModelContext model_;
  GenerationContext served_;  // what the shapes name: the model and the system fingerprint
  ResponseStore stored_{16, 1 << 20};
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

// An assistant turn that only calls tools reaches the template with content
// "" (what llama-server and vLLM hand it), so that templates which use content
// as a string (Qwen3's as llama.cpp ships it: '</think>' in content) render
// it; templates that test content for none (DeepSeek-R1's distills, in
// tests/data/chat_templates) keep the null they test for.
TEST_F(ApiMappingTest, AToolCallOnlyTurnReachesTheTemplateWithEmptyContent) {
  const ChatTemplate strict(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if '</think>' in m.content %}{% endif %}"
      "{{ m.content }}{% if m.tool_calls %}[calls]{% endif %}<|im_end|>\n{% endfor %}<|im_start|>assistant\n");
  model_.chat_template = &strict;
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get", "parameters": {}}}])";
  const GenerationJob c = chat(R"({"messages": [{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}], )" + tools + "}");
  const GenerationJob m = messages(R"({"messages": [{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "get", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "sunny"}]}],
      "tools": [{"name": "get", "input_schema": {}}], "max_tokens": 5})");
  const GenerationJob r = responses(R"({"input": [{"role": "user", "content": "Weather?"},
      {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "sunny"}],
      "tools": [{"type": "function", "name": "get", "parameters": {}}]})");
  // (The template prints the calls itself, so they are not written into the content.)
  const std::string turn = "<|im_start|>assistant\n[calls]<|im_end|>\n<|im_start|>tool\nsunny<|im_end|>";
  for (const GenerationJob* job : {&c, &m, &r})
    EXPECT_NE(tokenizer_->decode(job->prompts.at(0), true).find(turn), std::string::npos)
        << tokenizer_->decode(job->prompts.at(0), true);

  std::ifstream in(testing::source_path("tests/data/chat_templates/deepseek-r1-distill-qwen.jinja"), std::ios::binary);
  const ChatTemplate deepseek(std::string(std::istreambuf_iterator<char>(in), {}));
  EXPECT_TRUE(template_tests_for_null_content(deepseek.source()));
  EXPECT_FALSE(template_tests_for_null_content(template_->source()));
  EXPECT_FALSE(template_tests_for_null_content(strict.source()));
  // DeepSeek's own template also concatenates the arguments as a string, so
  // the none branch is shown on a template that tests only that.
  const ChatTemplate tests_none(
      "{% for m in messages %}{% if m.content is none %}[calls {{ m.tool_calls[0].function.name }}]"
      "{% else %}{{ m.content }}{% endif %}{% endfor %}");
  EXPECT_TRUE(template_tests_for_null_content(tests_none.source()));
  model_.chat_template = &tests_none;
  model_.null_tool_call_content = true;
  const std::string text = tokenizer_->decode(
      chat(R"({"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": null,
      "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{}"}}]}],
      "add_generation_prompt": false})")
          .prompts.at(0),
      true);
  EXPECT_EQ(text, "Weather?[calls get]");
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
     "must be a string"},
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
    {"messages", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
        "output_config": {"format": {"type": "xml", "schema": {}}}})",
     400, "output_config.format", "json_schema"},
    {"messages", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
        "output_config": {"format": {"type": "json_schema"}}})",
     400, "output_config.format", "schema"},
    {"messages", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
        "output_config": {"format": {"type": "json_schema", "schema": {"$ref": "#/$defs/Nope"}}}})",
     400, "output_config.format", "Nope"},
    {"messages", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
        "output_config": {"format": {"type": "json_schema", "schema": {}}}, "guided_regex": "a+"})",
     400, "output_config.format", "both constrain"},
    {"messages", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
        "tools": [{"name": "get", "input_schema": {}}], "tool_choice": {"type": "any"},
        "output_config": {"format": {"type": "json_schema", "schema": {}}}})",
     400, "tool_choice", "cannot also constrain"},
    {"responses", R"({"input": "hi", "previous_response_id": "r"})", 400, "previous_response_id",
     "not stored on this server"},
    {"responses", R"({"input": "hi", "previous_response_id": 7})", 400, "previous_response_id", "must be a response's id"},
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

// llama-server's {"type": "json_object", "schema": {...}} is that schema's
// constraint (the compiler's cache gives the very same one).
TEST_F(ApiMappingTest, AJsonObjectFormatWithASchemaIsThatSchema) {
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})";
  const GenerationJob with_schema = chat(std::string("{") + kUser +
                                         R"(, "response_format": {"type": "json_object", "schema": )" + schema + "}}");
  const GenerationJob json_schema = chat(std::string("{") + kUser +
                                         R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x",
      "schema": )" + schema + "}}}");
  const GenerationJob any_object = chat(std::string("{") + kUser + R"(, "response_format": {"type": "json_object"}})");
  ASSERT_NE(with_schema.params.constraint, nullptr);
  EXPECT_EQ(with_schema.params.constraint.get(), json_schema.params.constraint.get());
  EXPECT_NE(with_schema.params.constraint.get(), any_object.params.constraint.get());
}

// Anthropic's structured outputs: output_config.format (what the anthropic
// client's messages.parse(output_format=...) sends), and the beta's
// top-level output_format, are the schema's constraint, as response_format's.
TEST_F(ApiMappingTest, AnthropicOutputFormatIsTheSchemasConstraint) {
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
      "additionalProperties": false})";
  const GenerationJob c = chat(std::string("{") + kUser +
                               R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x",
      "schema": )" + schema + "}}}");
  const GenerationJob m = messages(std::string("{") + kUser + R"(, "max_tokens": 20,
      "output_config": {"format": {"type": "json_schema", "schema": )" + schema + "}}}");
  const GenerationJob beta = messages(std::string("{") + kUser + R"(, "max_tokens": 20,
      "output_format": {"type": "json_schema", "schema": )" + schema + "}}");
  const GenerationJob effort_only = messages(std::string("{") + kUser + R"(, "max_tokens": 20,
      "output_config": {"effort": "low"}})");
  ASSERT_NE(c.params.constraint, nullptr);
  EXPECT_EQ(m.params.constraint.get(), c.params.constraint.get());
  EXPECT_EQ(beta.params.constraint.get(), c.params.constraint.get());
  EXPECT_EQ(effort_only.params.constraint, nullptr);
}

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
// a forced tool call names harmony's control tokens, so with a vocabulary
// that lacks them (Qwen's, here) it is a 400 that says so
// (harmony_constraint_test.cc forces calls with gpt-oss's).
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
    EXPECT_NE(std::string(e.what()).find("lacks harmony's control tokens"), std::string::npos) << e.what();
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
  ResponseBuilder openai(c, *tokenizer_, "m", "chatcmpl-1", 0, served_.system_fingerprint);
  openai.add(0, delta("Hel", false));
  openai.add(0, delta("lo", true));
  const Json o = openai.response(usage);
  EXPECT_EQ(o["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(o["system_fingerprint"], "fp_0123456789abcdef");
  EXPECT_EQ(o["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(o["usage"]["total_tokens"], 11);

  const GenerationJob m = messages(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5})");
  std::unique_ptr<AnswerShape> anthropic = make_messages_shape(m, *tokenizer_, served_);
  anthropic->add(0, delta("Hel", false));
  anthropic->add(0, delta("lo", true));
  const Json a = parse_json_object(anthropic->response(usage));
  EXPECT_EQ(a["type"], "message");
  EXPECT_EQ(a["content"][0]["text"], "Hello");
  EXPECT_EQ(a["stop_reason"], "end_turn");
  EXPECT_EQ(a["usage"]["output_tokens"], 2);

  const GenerationJob r = responses(R"({"input": "hi"})");
  std::unique_ptr<AnswerShape> response = make_responses_shape(r, *tokenizer_, served_);
  response->add(0, delta("Hel", false));
  response->add(0, delta("lo", true));
  const Json x = parse_json_object(response->response(usage));
  EXPECT_EQ(x["object"], "response");
  EXPECT_EQ(x["status"], "completed");
  EXPECT_EQ(x["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(x["usage"]["output_tokens"], 2);
  EXPECT_EQ(x["system_fingerprint"], "fp_0123456789abcdef");
}

// OpenAI's system_fingerprint is on the response and on every stream chunk
// (the role chunk, each delta, the usage chunk), and null where the server
// has none.
TEST_F(ApiMappingTest, EveryChunkCarriesTheSystemFingerprint) {
  const GenerationJob c = chat(std::string("{") + kUser + "}");
  ResponseBuilder openai(c, *tokenizer_, "m", "chatcmpl-1", 0, "fp_0123456789abcdef");
  std::vector<Json> chunks = openai.opening_chunks();
  chunks.push_back(openai.chunk(0, delta("Hel", false)));
  chunks.push_back(openai.chunk(0, delta("lo", true)));
  chunks.push_back(openai.usage_chunk({}));
  ASSERT_EQ(chunks.size(), 4u);
  for (const Json& chunk : chunks) EXPECT_EQ(chunk["system_fingerprint"], "fp_0123456789abcdef") << chunk.dump();
  const GenerationJob p = completion(R"({"prompt": "hi"})");
  ResponseBuilder completions(p, *tokenizer_, "m", "cmpl-1", 0, "fp_0123456789abcdef");
  EXPECT_EQ(completions.chunk(0, delta("x", true))["system_fingerprint"], "fp_0123456789abcdef");
  ResponseBuilder unnamed(c, *tokenizer_, "m", "chatcmpl-2", 0);
  EXPECT_TRUE(unnamed.response({})["system_fingerprint"].is_null());
}

// Clients and test suites match ids by their prefix: OpenAI's responses are
// resp_..., their items msg_ / fc_ / rs_..., Anthropic's messages msg_... and
// its tool uses toolu_...; chat completions stay chatcmpl-... and cmpl-....
TEST_F(ApiMappingTest, IdsAreSpelledAsEachApiSpellsThem) {
  auto starts = [](const Json& id, const std::string& prefix) {
    return id.is_string() && id.get<std::string>().rfind(prefix, 0) == 0 &&
           id.get<std::string>().size() > prefix.size() + 8;
  };
  EXPECT_TRUE(starts(new_response_id("chatcmpl-"), "chatcmpl-"));
  const std::string call = "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>";
  const GenerationJob m = messages(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50,
      "tools": [{"name": "get", "input_schema": {}}]})");
  std::unique_ptr<AnswerShape> anthropic = make_messages_shape(m, *tokenizer_, served_);
  anthropic->add(0, delta("Hi. " + call, true));
  const Json a = parse_json_object(anthropic->response({}));
  EXPECT_TRUE(starts(a["id"], "msg_")) << a.dump();
  EXPECT_TRUE(starts(a["content"][1]["id"], "toolu_")) << a.dump();

  model_.reasoning = true;
  const GenerationJob r = responses(R"({"input": "hi", "tools": [{"type": "function", "name": "get",
      "parameters": {}}]})");
  std::unique_ptr<AnswerShape> shape = make_responses_shape(r, *tokenizer_, served_);
  shape->add(0, delta("<think>so</think>Hi. " + call, true));
  const Json x = parse_json_object(shape->response({}));
  EXPECT_TRUE(starts(x["id"], "resp_")) << x.dump();
  ASSERT_EQ(x["output"].size(), 3u) << x.dump();
  EXPECT_TRUE(starts(x["output"][0]["id"], "rs_")) << x.dump();
  EXPECT_TRUE(starts(x["output"][1]["id"], "msg_")) << x.dump();
  EXPECT_TRUE(starts(x["output"][2]["id"], "fc_")) << x.dump();
  EXPECT_TRUE(starts(x["output"][2]["call_id"], "call_")) << x.dump();
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
  std::unique_ptr<AnswerShape> anthropic = make_messages_shape(m, *tokenizer_, served_);
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
  std::unique_ptr<AnswerShape> anthropic = make_messages_shape(m, *tokenizer_, served_);
  std::string events = anthropic->opening_events();
  for (std::size_t i = 0; i < pieces.size(); ++i) events += anthropic->delta_events(0, delta(pieces[i], i + 1 == pieces.size()));
  events += anthropic->closing_events({});
  no_markup(events);
  EXPECT_NE(events.find("thinking"), std::string::npos);
  std::unique_ptr<AnswerShape> anthropic_whole = make_messages_shape(m, *tokenizer_, served_);
  for (std::size_t i = 0; i < pieces.size(); ++i) anthropic_whole->add(0, delta(pieces[i], i + 1 == pieces.size()));
  const Json a = parse_json_object(anthropic_whole->response({}));
  EXPECT_EQ(a["content"][0]["type"], "thinking");
  EXPECT_EQ(a["content"][0]["thinking"], "Simple: 4.");
  EXPECT_EQ(a["content"][1]["text"], "Quatre.");

  const GenerationJob r = responses(R"({"input": "hi", "stream": true})");
  std::unique_ptr<AnswerShape> response = make_responses_shape(r, *tokenizer_, served_);
  events = response->opening_events();
  for (std::size_t i = 0; i < pieces.size(); ++i) events += response->delta_events(0, delta(pieces[i], i + 1 == pieces.size()));
  events += response->closing_events({});
  no_markup(events);
  EXPECT_NE(events.find("response.reasoning_text.delta"), std::string::npos);
  std::unique_ptr<AnswerShape> response_whole = make_responses_shape(r, *tokenizer_, served_);
  for (std::size_t i = 0; i < pieces.size(); ++i) response_whole->add(0, delta(pieces[i], i + 1 == pieces.size()));
  const Json x = parse_json_object(response_whole->response({}));
  EXPECT_EQ(x["output"][0]["type"], "reasoning");
  EXPECT_EQ(x["output"][1]["content"][0]["text"], "Quatre.");
}

}  // namespace
}  // namespace folio::server

namespace folio::server {
namespace {

// A reasoning budget, whichever API names it, is the tokens of <think> and
// </think> with the count; it needs a model that thinks, a chat request and
// no structured output, and an effort needs a template that takes one.
TEST_F(ApiMappingTest, AReasoningBudgetIsTheSameBoundFromEachApi) {
  model_.reasoning = true;
  const GenerationJob c = chat(std::string("{") + kUser + R"(, "max_reasoning_tokens": 7})");
  const ReasoningBudget& b = c.params.reasoning_budget;
  EXPECT_EQ(b.max_tokens, 7);
  EXPECT_EQ(b.open, tokenizer_->encode("<think>", false, true));
  EXPECT_EQ(b.close, tokenizer_->encode("</think>", false, true));
  EXPECT_FALSE(b.close.empty());
  const GenerationJob m = messages(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50,
      "thinking": {"type": "enabled", "budget_tokens": 7}})");
  EXPECT_EQ(m.params.reasoning_budget.max_tokens, 7);
  EXPECT_EQ(m.params.reasoning_budget.close, b.close);
  const GenerationJob r = responses(R"({"input": "hi", "max_reasoning_tokens": 7})");
  EXPECT_EQ(r.params.reasoning_budget.max_tokens, 7);
  EXPECT_FALSE(chat(std::string("{") + kUser + "}").params.reasoning_budget.active());

  auto refused = [&](const std::function<void()>& f, const std::string& param) {
    try {
      f();
      ADD_FAILURE() << "not refused: " << param;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), param) << e.what();
    }
  };
  refused(
      [&] {
        chat(std::string("{") + kUser + R"(, "max_reasoning_tokens": 7, "response_format": {"type": "json_object"}})");
      },
      "max_reasoning_tokens");
  refused(
      [&] {
        messages(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
      "thinking": {"type": "enabled", "budget_tokens": -3}})");
      },
      "thinking");
  refused([&] { completion(R"({"prompt": "hi", "max_reasoning_tokens": 3})"); }, "max_reasoning_tokens");
  refused([&] { chat(std::string("{") + kUser + R"(, "reasoning_effort": "low"})"); }, "reasoning_effort");
  refused([&] { responses(R"({"input": "hi", "reasoning": {"effort": "low"}})"); }, "reasoning");
  model_.reasoning = false;
  refused([&] { chat(std::string("{") + kUser + R"(, "max_reasoning_tokens": 7})"); }, "max_reasoning_tokens");
}

// A template that takes reasoning_effort gets it as a variable (a request's own
// chat_template_kwargs win).
TEST_F(ApiMappingTest, AReasoningEffortReachesATemplateThatTakesIt) {
  ChatTemplate effort("{{ messages[0]['content'] }} effort={{ reasoning_effort | default('none') }}");
  model_.chat_template = &effort;
  auto prompt = [&](const std::string& body) { return tokenizer_->decode(chat(body).prompts[0], true); };
  EXPECT_EQ(prompt(std::string("{") + kUser + R"(, "reasoning_effort": "high"})"), "hi effort=high");
  EXPECT_EQ(prompt(std::string("{") + kUser + "}"), "hi effort=none");
  EXPECT_EQ(prompt(std::string("{") + kUser +
                   R"(, "reasoning_effort": "high", "chat_template_kwargs": {"reasoning_effort": "low"}})"),
            "hi effort=low");
  EXPECT_EQ(tokenizer_->decode(responses(R"({"input": "Hello", "reasoning": {"effort": "medium"}})").prompts[0], true),
            "Hello effort=medium");
}

// store and previous_response_id: the stored conversation goes between the
// request's instructions and its input; the previous instructions do not
// carry over; an evicted or unknown id is a 400 that says which.
TEST_F(ApiMappingTest, APreviousResponseContinuesItsConversation) {
  ResponseStore store(1, 1 << 20);
  const GenerationJob first = responses(R"({"input": "My name is Ada.", "instructions": "Be brief."})");
  ResponseStorage storage =
      read_response_storage(parse(R"({"input": "My name is Ada.", "instructions": "Be brief."})"));
  EXPECT_TRUE(storage.store);
  EXPECT_TRUE(storage.has_instructions);
  std::unique_ptr<AnswerShape> shape =
      make_responses_shape(first, *tokenizer_, served_, &store, storage, {{"user", "My name is Ada."}});
  shape->add(0, delta("Hello Ada.", true));
  const Json answer = parse_json_object(shape->response({}));
  EXPECT_EQ(answer["store"], true);
  const std::string id = answer["id"].get<std::string>();
  ASSERT_NE(store.find(id), nullptr);
  EXPECT_EQ(dump_json(store.find(id)->response), dump_json(answer));

  const Json body =
      parse(R"({"input": "What is my name?", "instructions": "Be kind.", "previous_response_id": ")" + id + R"("})");
  ChatRequest follow = read_responses_request(body);
  continue_stored(store, read_response_storage(body), follow);
  ASSERT_EQ(follow.messages.size(), 4u);
  EXPECT_EQ(follow.messages[0].content, "Be kind.");
  EXPECT_EQ(follow.messages[1].content, "My name is Ada.");
  EXPECT_EQ(follow.messages[2].role, "assistant");
  EXPECT_EQ(follow.messages[2].content, "Hello Ada.");
  EXPECT_EQ(follow.messages[3].content, "What is my name?");
  const GenerationJob whole = chat(R"({"messages": [{"role": "system", "content": "Be kind."},
      {"role": "user", "content": "My name is Ada."}, {"role": "assistant", "content": "Hello Ada."},
      {"role": "user", "content": "What is my name?"}]})");
  EXPECT_EQ(make_chat_job(std::move(follow), model_).prompts, whole.prompts);

  // Not stored (store: false), and evicted.
  const GenerationJob unstored = responses(R"({"input": "x"})");
  ResponseStorage off = read_response_storage(parse(R"({"input": "x", "store": false})"));
  std::unique_ptr<AnswerShape> kept_not = make_responses_shape(unstored, *tokenizer_, served_, &store, off, {});
  kept_not->add(0, delta("y", true));
  const Json unstored_answer = parse_json_object(kept_not->response({}));
  EXPECT_EQ(unstored_answer["store"], false);
  EXPECT_EQ(store.find(unstored_answer["id"].get<std::string>()), nullptr);
  store.put("resp_newer", StoredResponse{});  // the store holds one: the first is evicted
  for (const auto& [prev, word] :
       {std::pair{id, "evicted"}, std::pair{unstored_answer["id"].get<std::string>(), "not found"}}) {
    const Json b = parse(R"({"input": "x", "previous_response_id": ")" + prev + R"("})");
    ChatRequest r = read_responses_request(b);
    try {
      continue_stored(store, read_response_storage(b), r);
      ADD_FAILURE() << "continued " << prev;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), "previous_response_id");
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace folio::server
