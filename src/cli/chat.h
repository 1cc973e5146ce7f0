// The terminal chat's options and entry point (cli/chat.cc): `folio chat`,
// and `folio run` without a prompt in a terminal.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "cli/model_options.h"

namespace folio::cli {

struct ChatOptions {
  ModelOptions model;
  std::string url;           // a server to chat with instead of a local model
  std::string api_key;       // --url: its key
  std::string remote_model;  // --url: the `model` field
  std::string system;
  int max_tokens = 1024;
  float temperature = 0.7f;
  float top_p = 0.95f;
  std::int64_t seed = -1;
  std::int64_t context_tokens = 8192;
};

void add_chat_options(CLI::App* cmd, ChatOptions& o);
void run_chat(const ChatOptions& o);
void add_chat(CLI::App& app);

}  // namespace folio::cli
