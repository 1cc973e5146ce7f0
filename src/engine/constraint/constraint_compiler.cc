#include "engine/constraint/constraint_compiler.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/constraint/constraint_impl.h"
#include "tokenizer/tokenizer.h"

namespace folio {
namespace {

const char* kind_name(ConstraintSpec::Kind kind) {
  switch (kind) {
    case ConstraintSpec::Kind::kJsonObject: return "json_object";
    case ConstraintSpec::Kind::kJsonSchema: return "json_schema";
    case ConstraintSpec::Kind::kRegex: return "regex";
    case ConstraintSpec::Kind::kChoice: return "choice";
    case ConstraintSpec::Kind::kGrammar: return "grammar";
    case ConstraintSpec::Kind::kStructuralTag: return "tool-call format";
  }
  return "?";
}

// A string as an EBNF literal: quotes, backslashes and control bytes
// escaped; other bytes (UTF-8 included) as they are.
std::string ebnf_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// xgrammar's message without the "[time] file.cc:line: " it starts with.
std::string xgrammar_message(std::string what) {
  if (!what.empty() && what.front() == '[') {
    if (auto end = what.find("] "); end != std::string::npos) what.erase(0, end + 2);
  }
  if (auto colon = what.find(": "); colon != std::string::npos && what.find(".cc:") < colon) what.erase(0, colon + 2);
  while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
  return what;
}

}  // namespace

std::string ConstraintSpec::key() const {
  std::string k = kind_name(kind);
  k += '\0';
  k += text;
  for (const std::string& c : choices) {
    k += '\0';
    k += c;
  }
  return k;
}

CompiledConstraint::CompiledConstraint(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)), vocab_size_(impl_->vocab_size) {}
CompiledConstraint::~CompiledConstraint() = default;

struct ConstraintCompiler::State {
  xgrammar::TokenizerInfo info;
  xgrammar::GrammarCompiler compiler;
};

ConstraintCompiler::ConstraintCompiler(const Tokenizer& tokenizer, std::int64_t vocab_size, std::size_t cache_entries)
    : tokenizer_(tokenizer), vocab_size_(vocab_size), cache_entries_(std::max<std::size_t>(cache_entries, 1)) {}

ConstraintCompiler::~ConstraintCompiler() = default;

std::shared_ptr<const CompiledConstraint> ConstraintCompiler::compile(const ConstraintSpec& spec) {
  const std::string key = spec.key();
  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      ++hits_;
      return it->second.first;
    }
  }
  // Compiled outside the lock (it can take a while); two racing compilations
  // of one key both succeed and the second replaces the first.
  auto compiled = compile_uncached(spec);
  std::lock_guard lock(mutex_);
  if (auto it = cache_.find(key); it != cache_.end()) {
    lru_.erase(it->second.second);
    cache_.erase(it);
  }
  lru_.push_front(key);
  cache_.emplace(key, std::make_pair(compiled, lru_.begin()));
  while (cache_.size() > cache_entries_) {
    cache_.erase(lru_.back());
    lru_.pop_back();
  }
  return compiled;
}

std::int64_t ConstraintCompiler::cache_hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

std::shared_ptr<const CompiledConstraint> ConstraintCompiler::compile_uncached(const ConstraintSpec& spec) {
  xgrammar::GrammarCompiler* compiler = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (!state_) {
      // xgrammar sees each token as the bytes it decodes to, and the model's
      // end-of-generation tokens end the constraint. A control token is seen
      // as the byte 0xFF, which no UTF-8 text holds: no text grammar allows
      // it, and a structural tag may name it by id (harmony's markers).
      // (xgrammar refuses a token that decodes to nothing, even by id.)
      // Ids the model scores past the tokenizer's are never allowed; tokens
      // past the model's scores (a vocab larger than the output) are dropped.
      const Vocab& vocab = tokenizer_.vocab();
      const std::int64_t n = std::min(vocab.size(), vocab_size_);
      std::vector<std::string> pieces(static_cast<std::size_t>(n));
      for (TokenId id = 0; id < n; ++id)
        pieces[static_cast<std::size_t>(id)] = vocab.is_control(id) ? "\xFF" : tokenizer_.token_to_piece(id, false);
      std::vector<std::int32_t> stops;
      for (TokenId id : vocab.end_of_generation_ids)
        if (id < n) stops.push_back(id);
      xgrammar::TokenizerInfo info(pieces, xgrammar::VocabType::RAW, static_cast<int>(vocab_size_), stops, false);
      xgrammar::GrammarCompiler grammar_compiler(info, /*max_threads=*/1, /*cache_enabled=*/false);
      state_ = std::make_unique<State>(State{std::move(info), std::move(grammar_compiler)});
    }
    compiler = &state_->compiler;
  }
  auto impl = std::make_unique<CompiledConstraint::Impl>(
      CompiledConstraint::Impl{xgrammar::CompiledGrammar(xgrammar::NullObj{}), vocab_size_});
  try {
    switch (spec.kind) {
      case ConstraintSpec::Kind::kJsonObject:
        // An object, as JSON mode promises (xgrammar's built-in JSON grammar
        // also takes an array); any keys and values, since a schema
        // without strict mode allows more properties. Compact, as below.
        impl->grammar = compiler->CompileJSONSchema(R"({"type": "object"})", /*any_whitespace=*/false, std::nullopt,
                                                    std::nullopt, /*strict_mode=*/false);
        break;
      case ConstraintSpec::Kind::kJsonSchema:
        // Compact JSON (", " and ": " between items, no other whitespace): a
        // small model given free whitespace can spend its tokens on newlines.
        impl->grammar = compiler->CompileJSONSchema(spec.text, /*any_whitespace=*/false);
        break;
      case ConstraintSpec::Kind::kRegex:
        impl->grammar = compiler->CompileRegex(spec.text);
        break;
      case ConstraintSpec::Kind::kChoice: {
        if (spec.choices.empty()) throw ConstraintError("choice needs at least one string to choose from");
        std::string rule = "root ::= ";
        for (std::size_t i = 0; i < spec.choices.size(); ++i) {
          if (spec.choices[i].empty()) throw ConstraintError(fmt::format("choice {} is an empty string", i));
          rule += (i ? " | " : "") + ebnf_literal(spec.choices[i]);
        }
        impl->grammar = compiler->CompileGrammar(rule);
        break;
      }
      case ConstraintSpec::Kind::kGrammar:
        impl->grammar = compiler->CompileGrammar(spec.text);
        break;
      case ConstraintSpec::Kind::kStructuralTag:
        impl->grammar = compiler->CompileStructuralTag(spec.text);
        break;
    }
  } catch (const ConstraintError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConstraintError(fmt::format("the {} cannot be compiled: {}", kind_name(spec.kind), xgrammar_message(e.what())));
  }
  return std::make_shared<const CompiledConstraint>(std::move(impl));
}

}  // namespace folio
