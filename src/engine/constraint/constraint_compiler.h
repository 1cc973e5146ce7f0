// ConstraintCompiler: a request's output constraint (a JSON schema, any JSON
// object, a regex, a choice of strings or an EBNF/GBNF grammar) compiled
// against one tokenizer's vocabulary through xgrammar, cached by its text so
// that a schema sent again costs a lookup. Thread-safe: the server's workers
// compile while the engine matches.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/ids.h"

namespace folio {

class Tokenizer;

struct ConstraintSpec {
  // kJsonObject: any JSON object (its text unused).
  // kStructuralTag: xgrammar's structural-tag JSON (tool calls: tags whose
  // content is a JSON schema, free text between them or not).
  enum class Kind { kJsonObject, kJsonSchema, kRegex, kChoice, kGrammar, kStructuralTag };
  Kind kind = Kind::kJsonObject;
  std::string text;                  // the schema (JSON text), regex, grammar (root rule `root`) or structural tag
  std::vector<std::string> choices;  // kChoice: the output is exactly one of these

  // What the cache is keyed by.
  std::string key() const;
};

// The request's constraint could not be compiled; the message names the
// problem (the server answers 400 with it).
class ConstraintError : public Error {
 public:
  using Error::Error;
};

// A compiled constraint: immutable, shared by every sequence that uses it.
class CompiledConstraint {
 public:
  struct Impl;
  explicit CompiledConstraint(std::unique_ptr<Impl> impl);
  ~CompiledConstraint();
  const Impl& impl() const { return *impl_; }
  std::int64_t vocab_size() const { return vocab_size_; }
  // 32-bit words of one token mask: ceil(vocab_size / 32).
  std::int32_t mask_words() const { return static_cast<std::int32_t>((vocab_size_ + 31) / 32); }

 private:
  std::unique_ptr<Impl> impl_;
  std::int64_t vocab_size_;
};

class ConstraintCompiler {
 public:
  // vocab_size: the model's logits row (at least the tokenizer's vocabulary;
  // ids past it are never allowed). The tokenizer must outlive the compiler.
  ConstraintCompiler(const Tokenizer& tokenizer, std::int64_t vocab_size, std::size_t cache_entries = 64);
  ~ConstraintCompiler();

  // Throws ConstraintError naming what cannot be compiled.
  std::shared_ptr<const CompiledConstraint> compile(const ConstraintSpec& spec);

  std::int64_t cache_hits() const;

 private:
  struct State;
  std::shared_ptr<const CompiledConstraint> compile_uncached(const ConstraintSpec& spec);

  const Tokenizer& tokenizer_;
  std::int64_t vocab_size_;
  std::size_t cache_entries_;
  mutable std::mutex mutex_;
  std::unique_ptr<State> state_;  // xgrammar's tokenizer info and compiler, made on first use
  // Least recently used last out: keys in use order, most recent first.
  std::list<std::string> lru_;
  std::unordered_map<std::string, std::pair<std::shared_ptr<const CompiledConstraint>, std::list<std::string>::iterator>>
      cache_;
  std::int64_t hits_ = 0;
};

}  // namespace folio
