#include "cli/commands.h"

#include <cstdlib>

namespace folio::cli {

void register_commands(CLI::App& app) {
  add_inspect(app);
  add_tokenize(app);
  add_run(app);
  add_perplexity(app);
  add_kv_calc(app);
  add_serve(app);
}

std::string default_model_path() {
  std::string dir;
  if (const char* env = std::getenv("FOLIO_MODELS")) {
    dir = env;
  } else {
    const char* home = std::getenv("HOME");
    dir = std::string(home ? home : ".") + "/.cache/folio/models";
  }
  return dir + "/smollm2-135m-instruct-q4_1.gguf";
}

}  // namespace folio::cli
