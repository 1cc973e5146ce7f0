// folio_render_template: renders a chat template for the Python tests, which
// compare it byte for byte with jinja2.
//
//   folio_render_template [--raw] [--now SECONDS] TEMPLATE_FILE < input.json
//
// Chat mode reads {"messages", "add_generation_prompt", "bos_token",
// "eos_token", "tools"?, "extra"?} and renders as ChatTemplate does; --raw
// renders the input object as the template's variables. The rendering goes
// to stdout; a template error goes to stderr as one JSON object
// {"kind", "line", "column", "detail", "message"} with exit status 1.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "jinja/error.h"
#include "tokenizer/chat_template.h"

namespace {

int usage(const std::string& why) {
  std::cerr << "folio_render_template: " << why
            << "\nusage: folio_render_template [--raw] [--now SECONDS] TEMPLATE_FILE < input.json\n";
  return 2;
}

}  // namespace

namespace {

// The error as one JSON line on stderr; exit status 1.
int report(const char* kind, int line, int column, const std::string& detail, const char* message) {
  nlohmann::ordered_json error = {
      {"kind", kind}, {"line", line}, {"column", column}, {"detail", detail}, {"message", message},
  };
  std::cerr << error.dump() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool raw = false;
  std::optional<std::time_t> now;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--raw") {
      raw = true;
    } else if (arg == "--now" && i + 1 < argc) {
      now = static_cast<std::time_t>(std::stoll(argv[++i]));
    } else if (path.empty() && !arg.starts_with("--")) {
      path = arg;
    } else {
      return usage("unexpected argument " + arg);
    }
  }
  if (path.empty()) return usage("no template file given");
  std::ifstream file(path, std::ios::binary);
  if (!file) return usage("cannot read " + path);
  std::string source((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  nlohmann::ordered_json input;
  try {
    input = nlohmann::ordered_json::parse(std::cin);
  } catch (const std::exception& e) {
    return usage(std::string("stdin is not JSON: ") + e.what());
  }

  try {
    std::string out;
    if (raw) {
      folio::jinja::RenderOptions options;
      options.now = now;
      out = folio::jinja::JinjaTemplate(source).render(input, options);
    } else {
      folio::ChatRenderOptions options;
      options.add_generation_prompt = input.value("add_generation_prompt", false);
      options.bos_token = input.value("bos_token", "");
      options.eos_token = input.value("eos_token", "");
      if (input.contains("tools")) options.tools = input["tools"];
      if (input.contains("extra")) options.extra = input["extra"];
      options.now = now;
      out = folio::ChatTemplate(source).render(input.at("messages"), options);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  } catch (const folio::jinja::JinjaError& e) {
    return report(folio::jinja::JinjaError::kind_name(e.kind()), e.line(), e.column(), e.detail(), e.what());
  } catch (const folio::ChatTemplateError& e) {
    static const char* const kNames[] = {"syntax", "runtime", "raised", "limit"};  // the Jinja engine's words
    return report(kNames[static_cast<int>(e.kind())], e.line(), e.column(), e.detail(), e.what());
  }
}
