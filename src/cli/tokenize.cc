// `folio tokenize -m MODEL TEXT`: the token ids of a text, printed as
// llama.cpp's llama-tokenize prints them (one "%6d -> 'piece'" line per token,
// or "[1, 2, 3]" with --ids), so the two can be diffed.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "model/gguf_file.h"
#include "model/hf_checkpoint.h"
#include "tokenizer/tokenizer.h"

namespace folio::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  std::string file;
  bool from_stdin = false;
  bool ids = false;
  bool pieces = false;
  bool no_bos = false;
  bool parse_special = false;
  bool no_escape = false;
  bool show_count = false;
  bool timing = false;
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The escapes llama-tokenize understands in its prompt: \n \r \t \' \" \\ \xHH.
std::string process_escapes(std::string_view in) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\' || i + 1 >= in.size()) {
      out += in[i];
      continue;
    }
    const char c = in[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case 'x':
        if (i + 2 < in.size() && hex_value(in[i + 1]) >= 0 && hex_value(in[i + 2]) >= 0) {
          out += static_cast<char>(hex_value(in[i + 1]) * 16 + hex_value(in[i + 2]));
          i += 2;
          break;
        }
        [[fallthrough]];
      default:
        out += '\\';
        out += c;
    }
  }
  return out;
}

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void run_tokenize(const TokenizeOptions& o) {
  if (o.ids && o.pieces) fail("--ids and --pieces each choose the output; give one of them");
  const int sources = !o.text.empty() + !o.file.empty() + o.from_stdin;
  if (sources > 1) fail("give the text once: as an argument, with --file or with --stdin");
  if (sources == 0) fail("no text to tokenize: give it as an argument, with --file FILE or with --stdin");

  std::string text;
  if (!o.file.empty()) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) fail("cannot read {}; check the path", o.file);
    text = read_all(in);
  } else if (o.from_stdin) {
    text = read_all(std::cin);
  } else {
    text = o.text;
  }
  if (!o.no_escape) text = process_escapes(text);

  const std::string path = resolve_model(o.model);
  const auto start = std::chrono::steady_clock::now();
  auto tokenizer = Tokenizer::create(is_model_directory(path) ? Vocab::from_hf(path)
                                                             : Vocab::from_gguf(GgufFile::open(path)));
  const auto loaded = std::chrono::steady_clock::now();

  // As llama-tokenize: BOS (and EOS) only where the vocab adds BOS.
  const bool add_special = tokenizer->vocab().add_bos && !o.no_bos;
  const std::vector<TokenId> ids = tokenizer->encode(text, add_special, o.parse_special);
  const auto encoded = std::chrono::steady_clock::now();

  std::string out;
  if (o.ids) {
    out += '[';
    for (std::size_t i = 0; i < ids.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", ids[i]);
    out += "]\n";
  } else {
    for (TokenId id : ids) out += fmt::format("{:6d} -> '{}'\n", id, tokenizer->token_to_piece(id, true));
  }
  if (o.show_count) out += fmt::format("Total number of tokens: {}\n", ids.size());
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (o.timing) {
    using ms = std::chrono::duration<double, std::milli>;
    fmt::print(stderr, "load {:.1f} ms, encode {:.1f} ms ({} bytes, {} tokens)\n", ms(loaded - start).count(),
               ms(encoded - loaded).count(), text.size(), ids.size());
  }
}

}  // namespace

void add_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of a text, as llama.cpp's llama-tokenize does");
  auto o = std::make_shared<TokenizeOptions>();
  cmd->add_option("text", o->text, "Text to tokenize (escapes such as \\n are processed unless --no-escape)");
  cmd->add_option("-m,--model", o->model, "GGUF file or Hugging Face directory (default: the default model)");
  cmd->add_option("-f,--file", o->file, "Read the text from a file");
  cmd->add_flag("--stdin", o->from_stdin, "Read the text from standard input");
  cmd->add_flag("--ids", o->ids, "Print only the ids, as [1, 2, 3]");
  cmd->add_flag("--pieces", o->pieces, "Print one \"id -> 'piece'\" line per token (the default)");
  cmd->add_flag("--no-bos", o->no_bos, "Do not add the BOS token");
  cmd->add_flag("--parse-special", o->parse_special, "Read control tokens such as <|im_start|> in the text");
  cmd->add_flag("--no-escape", o->no_escape, "Take backslashes in the text literally");
  cmd->add_flag("--show-count", o->show_count, "Print the number of tokens");
  cmd->add_flag("--timing", o->timing, "Print load and encode times to standard error");
  cmd->callback([o] { run_tokenize(*o); });
}

}  // namespace folio::cli
