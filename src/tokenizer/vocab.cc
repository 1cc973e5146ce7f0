#include "tokenizer/vocab.h"

#include <algorithm>

#include "core/error.h"
#include "model/gguf_file.h"

namespace folio {
namespace {

TokenId optional_id(const GgufFile& f, const char* key, std::int64_t vocab_size) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) return -1;
  std::int64_t id = v->as_int(key);
  if (id < 0 || id >= vocab_size) {
    // Some converters write -1 or an out-of-range id for "none".
    return -1;
  }
  return static_cast<TokenId>(id);
}

}  // namespace

bool Vocab::is_control(TokenId id) const {
  return id >= 0 && id < size() && types[id] == TokenType::kControl;
}

bool Vocab::is_end_of_generation(TokenId id) const {
  return std::find(end_of_generation_ids.begin(), end_of_generation_ids.end(), id) !=
         end_of_generation_ids.end();
}

Vocab Vocab::from_gguf(const GgufFile& f) {
  Vocab v;
  v.model = f.get_string("tokenizer.ggml.model", "");
  if (v.model == "gpt2") {
    v.kind = VocabKind::kBytePairGpt2;
  } else if (v.model == "llama") {
    v.kind = VocabKind::kSentencePieceBpe;
  } else if (v.model.empty()) {
    fail("{} has no tokenizer (tokenizer.ggml.model is missing)", f.path());
  } else {
    fail("{}: tokenizer model \"{}\" is not supported (gpt2 and llama are)", f.path(), v.model);
  }
  v.pre = f.get_string("tokenizer.ggml.pre", "default");

  const auto& texts = f.get("tokenizer.ggml.tokens").strings("tokenizer.ggml.tokens");
  const std::int64_t n = static_cast<std::int64_t>(texts.size());
  if (n == 0) fail("{}: tokenizer.ggml.tokens is empty", f.path());
  if (n > (1 << 30)) fail("{}: {} tokens is more than folio supports", f.path(), n);
  v.tokens.assign(texts.begin(), texts.end());

  v.types.assign(n, TokenType::kNormal);
  if (const GgufValue* t = f.find("tokenizer.ggml.token_type")) {
    auto ids = t->ints("tokenizer.ggml.token_type");
    if (static_cast<std::int64_t>(ids.size()) != n)
      fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", f.path(), ids.size(), n);
    for (std::int64_t i = 0; i < n; ++i) {
      if (ids[i] < 0 || ids[i] > 6) fail("{}: token {} has unknown type {}", f.path(), i, ids[i]);
      v.types[i] = static_cast<TokenType>(ids[i]);
    }
  }
  if (const GgufValue* s = f.find("tokenizer.ggml.scores")) {
    v.scores = s->floats("tokenizer.ggml.scores");
    if (static_cast<std::int64_t>(v.scores.size()) != n)
      fail("{}: tokenizer.ggml.scores has {} entries for {} tokens", f.path(), v.scores.size(), n);
  }
  if (const GgufValue* m = f.find("tokenizer.ggml.merges")) {
    const auto& merges = m->strings("tokenizer.ggml.merges");
    v.merges.assign(merges.begin(), merges.end());
  }
  if (v.kind == VocabKind::kBytePairGpt2 && v.merges.empty())
    fail("{}: a gpt2 tokenizer needs tokenizer.ggml.merges", f.path());
  if (v.kind == VocabKind::kSentencePieceBpe && v.scores.empty())
    fail("{}: a llama tokenizer needs tokenizer.ggml.scores", f.path());

  v.bos_id = optional_id(f, "tokenizer.ggml.bos_token_id", n);
  v.eos_id = optional_id(f, "tokenizer.ggml.eos_token_id", n);
  v.eot_id = optional_id(f, "tokenizer.ggml.eot_token_id", n);
  v.unk_id = optional_id(f, "tokenizer.ggml.unknown_token_id", n);
  v.pad_id = optional_id(f, "tokenizer.ggml.padding_token_id", n);
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", v.kind == VocabKind::kSentencePieceBpe);
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", false);
  v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", v.kind == VocabKind::kSentencePieceBpe);

  v.token_to_id.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v.token_to_id.emplace(v.tokens[i], static_cast<TokenId>(i));

  for (TokenId id : {v.eos_id, v.eot_id})
    if (id >= 0) v.end_of_generation_ids.push_back(id);
  return v;
}

}  // namespace folio
