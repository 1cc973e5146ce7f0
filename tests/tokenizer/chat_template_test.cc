// ChatTemplate: the templates our models carry are the ones under
// tests/data/chat_templates (which tests/python compares with jinja2), the
// ChatML fallback, the variables HF passes, and rendering from many threads.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "model/gguf_file.h"
#include "support/test_models.h"

namespace folio {
namespace {

std::string read_data(const std::string& name) {
  std::ifstream in(testing::source_path("tests/data/chat_templates/" + name), std::ios::binary);
  EXPECT_TRUE(in) << name;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

nlohmann::ordered_json conversation() {
  return nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "Bye"}])");
}

TEST(ChatTemplate, ChatMlFallbackIsTheDataFileAndRendersChatMl) {
  EXPECT_EQ(ChatTemplate::kChatMlSource, read_data("chatml.jinja"));
  ChatRenderOptions options;
  EXPECT_EQ(ChatTemplate::chatml().render(conversation(), options),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  options.add_generation_prompt = false;
  EXPECT_EQ(ChatTemplate::chatml().render(nlohmann::ordered_json::parse(R"([{"role": "user", "content": "x"}])"), options),
            "<|im_start|>user\nx<|im_end|>\n");
}

void expect_gguf_template(const std::string& gguf_path, const std::string& data_file) {
  GgufFile gguf = GgufFile::open(gguf_path);
  EXPECT_EQ(gguf.get_string("tokenizer.chat_template", ""), read_data(data_file));
  EXPECT_EQ(ChatTemplate::from_gguf(gguf).source(), read_data(data_file));
}

TEST(ChatTemplate, SmolLM2CarriesTheTestedTemplate) {
  FOLIO_REQUIRE_MODEL(path, testing::kSmolLM2);
  expect_gguf_template(path, "smollm2-135m-instruct.jinja");
}

TEST(ChatTemplate, QwenCoderCarriesTheTestedTemplates) {
  FOLIO_REQUIRE_MODEL(small, testing::kQwen05B);
  expect_gguf_template(small, "qwen2.5-coder-0.5b-instruct.jinja");
  FOLIO_REQUIRE_MODEL(large, testing::kQwen15B);
  expect_gguf_template(large, "qwen2.5-coder-1.5b-instruct.jinja");
}

TEST(ChatTemplate, GemmaWithoutATemplateFallsBackToChatMl) {
  FOLIO_REQUIRE_MODEL(path, testing::kGemma3);
  GgufFile gguf = GgufFile::open(path);
  EXPECT_EQ(gguf.find("tokenizer.chat_template"), nullptr);
  EXPECT_EQ(ChatTemplate::from_gguf(gguf).source(), ChatTemplate::kChatMlSource);
}

TEST(ChatTemplate, PassesTheVariablesHuggingFacePasses) {
  ChatTemplate t(
      "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools is none }}|{{ documents is none }}|"
      "{{ messages|length }}|{{ date_string|default('no date') }}|{{ custom }}");
  ChatRenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  EXPECT_EQ(t.render(conversation(), options), "<s>|</s>|True|True|True|4|no date|");
  options.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  options.extra = {{"date_string", "01 Jan 2025"}, {"custom", 7}, {"bos_token", "<override>"}};
  options.add_generation_prompt = false;
  EXPECT_EQ(t.render(conversation(), options), "<override>|</s>|False|False|True|4|01 Jan 2025|7");
}

TEST(ChatTemplate, TemplateRejectionsAreRaisedErrors) {
  ChatTemplate gemma(read_data("gemma-2-it.jinja"));
  ChatRenderOptions options;
  try {
    gemma.render(conversation(), options);
    FAIL() << "gemma-2 accepted a system message";
  } catch (const ChatTemplateError& e) {
    EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kRejected);
    EXPECT_EQ(e.detail(), "System role not supported");
  }
  auto users = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])");
  try {
    gemma.render(users, options);
    FAIL() << "gemma-2 accepted two user turns in a row";
  } catch (const ChatTemplateError& e) {
    EXPECT_EQ(e.detail(), "Conversation roles must alternate user/assistant/user/assistant/...");
  }
}

TEST(ChatTemplate, BadInputIsAClearError) {
  ChatRenderOptions options;
  EXPECT_THROW(ChatTemplate::chatml().render(nlohmann::ordered_json::object(), options), ChatTemplateError);
  options.extra = nlohmann::ordered_json::array();
  EXPECT_THROW(ChatTemplate::chatml().render(conversation(), options), ChatTemplateError);
  try {
    ChatTemplate("{% for m in messages %}\n{{ m.content }\n{% endfor %}");
    FAIL() << "a broken template parsed";
  } catch (const ChatTemplateError& e) {
    EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kSyntax);
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos);
  }
}

TEST(ChatTemplate, LongConversationsFitTheOutputBound) {
  // 3 MiB of text is over the 1 MiB default, but the bound grows with the input.
  std::string big(3u << 20, 'x');
  nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", big}}});
  ChatRenderOptions options;
  EXPECT_EQ(ChatTemplate::chatml().render(messages, options).size(), big.size() + 50);
  // A template cannot amplify its input past the bound.
  ChatTemplate amplifier("{% for i in range(100) %}{{ messages[0].content }}{% endfor %}");
  EXPECT_THROW(amplifier.render(messages, options), ChatTemplateError);
}

TEST(ChatTemplate, OneParseRendersFromManyThreads) {
  ChatTemplate t(read_data("llama-3.1-8b-instruct.jinja"));
  ChatRenderOptions options;
  options.bos_token = "<|begin_of_text|>";
  const std::string expected = t.render(conversation(), options);
  EXPECT_NE(expected.find("<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"), std::string::npos);
  std::vector<std::string> results(8);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 20; ++k) results[i] = t.render(conversation(), options);
    });
  }
  for (auto& thread : threads) thread.join();
  for (const std::string& r : results) EXPECT_EQ(r, expected);
}

TEST(ChatTemplate, RenderChatIsTheOneShotForm) {
  EXPECT_EQ(render_chat(ChatTemplate::kChatMlSource,
                        nlohmann::ordered_json::parse(R"([{"role": "user", "content": "q"}])"), true, "", ""),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace folio
