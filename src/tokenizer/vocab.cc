#include "tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <set>
#include <span>
#include <memory_resource>
#include <unordered_map>

#include "core/error.h"
#include "model/gguf_file.h"

namespace folio {
namespace {

// What a tokenizer.ggml.pre name means to llama.cpp: its regex family and the
// flags it sets (llama-vocab.cpp, llama_vocab::impl::load).
struct PreInfo {
  std::string_view name;
  PreTokenizerKind kind;
  bool clean_spaces;
  bool ignore_merges;
  bool add_bos;  // the default when tokenizer.ggml.add_bos_token is absent
};

constexpr PreTokenizerKind kDef = PreTokenizerKind::kDefault;
constexpr PreTokenizerKind kG2 = PreTokenizerKind::kGpt2;
constexpr PreTokenizerKind kL3 = PreTokenizerKind::kLlama3;
constexpr PreTokenizerKind kSm = PreTokenizerKind::kSmolLM;
constexpr PreTokenizerKind kQw = PreTokenizerKind::kQwen2;

constexpr std::array kPreTypes = {
    PreInfo{"default", kDef, true, false, false},
    PreInfo{"llama3", kL3, true, true, true},       PreInfo{"llama-v3", kL3, true, true, true},
    PreInfo{"llama-bpe", kL3, true, true, true},    PreInfo{"falcon3", kL3, true, true, true},
    PreInfo{"falcon-h1", kL3, true, true, true},    PreInfo{"pixtral", kL3, true, true, true},
    PreInfo{"midm-2.0", kL3, true, true, true},     PreInfo{"lfm2", kL3, true, true, true},
    PreInfo{"jina-v5-nano", kL3, true, true, true}, PreInfo{"dbrx", kL3, true, false, false},
    PreInfo{"smaug-bpe", kL3, true, false, false},
    PreInfo{"gpt-2", kG2, true, false, false},      PreInfo{"phi-2", kG2, true, false, false},
    PreInfo{"jina-es", kG2, true, false, false},    PreInfo{"jina-de", kG2, true, false, false},
    PreInfo{"gigachat", kG2, true, false, false},   PreInfo{"jina-v2-es", kG2, true, false, false},
    PreInfo{"jina-v2-de", kG2, true, false, false}, PreInfo{"a.x-4.0", kG2, true, false, false},
    PreInfo{"mellum", kG2, true, false, false},     PreInfo{"modern-bert", kG2, true, false, false},
    PreInfo{"jina-v1-en", kG2, true, false, false}, PreInfo{"jina-v2-code", kG2, true, false, false},
    PreInfo{"roberta-bpe", kG2, true, false, false}, PreInfo{"mpt", kG2, true, false, false},
    PreInfo{"olmo", kG2, true, false, false},       PreInfo{"jais", kG2, true, false, false},
    PreInfo{"exaone4", kG2, true, false, false},    PreInfo{"trillion", kG2, false, false, false},
    PreInfo{"granite-docling", kG2, false, false, false},
    PreInfo{"starcoder", kSm, true, false, false},  PreInfo{"refact", kSm, true, false, false},
    PreInfo{"command-r", kSm, false, false, false}, PreInfo{"smollm", kSm, false, false, false},
    PreInfo{"codeshell", kSm, true, false, false},  PreInfo{"exaone", kSm, true, false, false},
    PreInfo{"minerva-7b", kSm, true, false, false}, PreInfo{"mellum2", kSm, true, false, false},
    PreInfo{"qwen2", kQw, false, false, false},     PreInfo{"deepseek-r1-qwen", kQw, false, false, false},
    PreInfo{"kormo", kQw, false, false, false},     PreInfo{"f2llmv2", kQw, false, false, false},
    PreInfo{"stablelm2", kQw, true, false, false},  PreInfo{"megrez", kQw, true, false, false},
    PreInfo{"hunyuan", kQw, false, false, false},   PreInfo{"solar-open", kQw, false, false, false},
};

const PreInfo* find_pre(std::string_view name) {
  for (const PreInfo& p : kPreTypes)
    if (p.name == name) return &p;
  return nullptr;
}

std::string known_pre_names() {
  std::string names;
  for (const PreInfo& p : kPreTypes) {
    if (!names.empty()) names += ", ";
    names += p.name;
  }
  return names;
}

// Token texts llama.cpp recognises when the GGUF does not name the token; each
// list is in order of preference.
constexpr std::array<std::string_view, 11> kEotTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
    "<end_of_utterance>"};
constexpr std::array<std::string_view, 1> kEomTexts = {"<|eom_id|>"};
constexpr std::array<std::string_view, 8> kFimPreTexts = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
constexpr std::array<std::string_view, 8> kFimSufTexts = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
constexpr std::array<std::string_view, 8> kFimMidTexts = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
constexpr std::array<std::string_view, 5> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                                          "[PAD]"};
constexpr std::array<std::string_view, 5> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                                          "<REPO>", "<reponame>"};
constexpr std::array<std::string_view, 1> kFimSepTexts = {"<|file_sep|>"};

// Tokens that end generation whatever the GGUF says.
constexpr std::array<std::string_view, 22> kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~["};

// gpt-oss markers that are always rendered.
constexpr std::array<std::string_view, 4> kAlwaysRenderedTexts = {"<|channel|>", "<|message|>", "<|start|>",
                                                                  "<|constrain|>"};

TokenAttrs attrs_of(TokenType type) {
  switch (type) {
    case TokenType::kUnknown: return kAttrUnknown;
    case TokenType::kUnused: return kAttrUnused;
    case TokenType::kNormal: return kAttrNormal;
    case TokenType::kControl: return kAttrControl;
    case TokenType::kUserDefined: return kAttrUserDefined;
    case TokenType::kByte: return kAttrByte;
    case TokenType::kUndefined: return kAttrUndefined;
  }
  return kAttrUndefined;
}

// The id of a special token: the key's value when it names a token, else the
// vocab kind's default (llama.cpp's defaults) when that is in range, else -1.
TokenId special_id(const GgufFile& f, const char* key, std::int64_t fallback, std::int64_t vocab_size) {
  std::int64_t id = fallback < vocab_size ? fallback : -1;
  if (const GgufValue* v = f.find(key)) {
    std::int64_t value = v->as_int(key);
    if (value >= 0 && value < vocab_size) id = value;  // out of range: llama.cpp keeps the default
  }
  return static_cast<TokenId>(id);
}

}  // namespace

bool Vocab::is_control(TokenId id) const {
  return contains(id) && (attrs[id] & kAttrControl) != 0;
}

bool Vocab::is_end_of_generation(TokenId id) const {
  return std::binary_search(end_of_generation_ids.begin(), end_of_generation_ids.end(), id);
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
  const bool spm = v.kind == VocabKind::kSentencePieceBpe;

  const auto& texts = f.get("tokenizer.ggml.tokens").strings("tokenizer.ggml.tokens");
  const std::int64_t n = static_cast<std::int64_t>(texts.size());
  if (n == 0) fail("{}: tokenizer.ggml.tokens is empty", f.path());
  if (n > (1 << 30)) fail("{}: {} tokens is more than folio supports", f.path(), n);
  v.tokens.assign(texts.begin(), texts.end());

  if (const GgufValue* t = f.find("tokenizer.ggml.token_type")) {
    auto ids = t->ints("tokenizer.ggml.token_type");
    if (static_cast<std::int64_t>(ids.size()) < n)
      fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", f.path(), ids.size(), n);
    v.types.resize(n);
    for (std::int64_t i = 0; i < n; ++i) {
      if (ids[i] < 0 || ids[i] > 6) fail("{}: token {} has unknown type {}", f.path(), i, ids[i]);
      v.types[i] = static_cast<TokenType>(ids[i]);
    }
  }
  if (const GgufValue* s = f.find("tokenizer.ggml.scores")) {
    v.scores = s->floats("tokenizer.ggml.scores");
    if (static_cast<std::int64_t>(v.scores.size()) < n)
      fail("{}: tokenizer.ggml.scores has {} entries for {} tokens", f.path(), v.scores.size(), n);
    v.scores.resize(n);
  }
  if (const GgufValue* m = f.find("tokenizer.ggml.merges")) {
    const auto& merges = m->strings("tokenizer.ggml.merges");
    v.merges.assign(merges.begin(), merges.end());
  }

  // llama.cpp's defaults for files that leave a special token out.
  v.bos_id = special_id(f, "tokenizer.ggml.bos_token_id", spm ? 1 : 11, n);
  v.eos_id = special_id(f, "tokenizer.ggml.eos_token_id", spm ? 2 : 11, n);
  v.unk_id = special_id(f, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n);
  v.eot_id = special_id(f, "tokenizer.ggml.eot_token_id", -1, n);
  v.eom_id = special_id(f, "tokenizer.ggml.eom_token_id", -1, n);
  v.pad_id = special_id(f, "tokenizer.ggml.padding_token_id", -1, n);
  v.fim_pre_id = special_id(f, "tokenizer.ggml.fim_pre_token_id", -1, n);
  v.fim_suf_id = special_id(f, "tokenizer.ggml.fim_suf_token_id", -1, n);
  v.fim_mid_id = special_id(f, "tokenizer.ggml.fim_mid_token_id", -1, n);
  v.fim_pad_id = special_id(f, "tokenizer.ggml.fim_pad_token_id", -1, n);
  v.fim_rep_id = special_id(f, "tokenizer.ggml.fim_rep_token_id", -1, n);
  v.fim_sep_id = special_id(f, "tokenizer.ggml.fim_sep_token_id", -1, n);

  const PreInfo* pre = spm ? nullptr : find_pre(v.pre);
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", spm || (pre != nullptr && pre->add_bos));
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", false);
  v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", spm);

  v.finish(f.path());
  return v;
}

void Vocab::finish(std::string_view source) {
  const std::int64_t n = size();
  if (n == 0) fail("{}: the vocab has no tokens", source);
  if (types.empty()) types.assign(n, TokenType::kNormal);
  if (static_cast<std::int64_t>(types.size()) != n)
    fail("{}: {} token types for {} tokens", source, types.size(), n);
  if (!scores.empty() && static_cast<std::int64_t>(scores.size()) != n)
    fail("{}: {} token scores for {} tokens", source, scores.size(), n);
  if (kind == VocabKind::kSentencePieceBpe && scores.empty())
    fail("{}: a llama (SentencePiece) tokenizer needs tokenizer.ggml.scores", source);
  if (kind == VocabKind::kBytePairGpt2 && merges.empty())
    fail("{}: a gpt2 tokenizer needs tokenizer.ggml.merges", source);

  // Pre-tokenizer and its flags (only byte-level BPE has one).
  if (kind == VocabKind::kBytePairGpt2 && !pre_regexes.empty()) {
    pre_kind = PreTokenizerKind::kDefault;  // unused: the regexes are given
  } else if (kind == VocabKind::kBytePairGpt2) {
    const PreInfo* info = find_pre(pre);
    if (info == nullptr)
      fail("{}: pre-tokenizer \"{}\" (tokenizer.ggml.pre) is not supported; folio knows {}", source, pre,
           known_pre_names());
    pre_kind = info->kind;
    clean_spaces = info->clean_spaces;
    ignore_merges = info->ignore_merges;
  } else {
    pre_kind = PreTokenizerKind::kDefault;
    clean_spaces = false;
    ignore_merges = false;
  }

  for (std::int64_t i = 0; i < n; ++i)
    if (tokens[i].empty()) tokens[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp names it
  const std::int64_t repeat = token_index.build(tokens);
  if (repeat >= 0)
    fail("{}: token {} \"{}\" repeats token {}; the vocab is broken, convert the model again", source, repeat,
         tokens[repeat], find(tokens[repeat]));

  attrs.resize(n);
  for (std::int64_t i = 0; i < n; ++i) attrs[i] = attrs_of(types[i]);

  for (TokenId* id : {&bos_id, &eos_id, &eot_id, &eom_id, &unk_id, &pad_id, &fim_pre_id, &fim_suf_id,
                      &fim_mid_id, &fim_pad_id, &fim_rep_id, &fim_sep_id}) {
    if (*id < -1 || *id >= n) fail("{}: special token id {} is outside the vocab ({} tokens)", source, *id, n);
  }
  if (add_bos && bos_id < 0)
    fail("{}: the vocab asks for a BOS token (add_bos_token) but names none (bos_token_id)", source);
  if (add_eos && eos_id < 0)
    fail("{}: the vocab asks for an EOS token (add_eos_token) but names none (eos_token_id)", source);

  // Markers the GGUF does not name are found by their text and made control
  // tokens, as llama.cpp does.
  struct Detect {
    TokenId* id;
    std::span<const std::string_view> texts;
    std::vector<TokenId> candidates;
  };
  Detect detects[] = {{&eot_id, kEotTexts, {}},        {&eom_id, kEomTexts, {}},
                      {&fim_pre_id, kFimPreTexts, {}}, {&fim_suf_id, kFimSufTexts, {}},
                      {&fim_mid_id, kFimMidTexts, {}}, {&fim_pad_id, kFimPadTexts, {}},
                      {&fim_rep_id, kFimRepTexts, {}}, {&fim_sep_id, kFimSepTexts, {}}};
  for (Detect& d : detects) {
    if (std::find(detected_markers.begin(), detected_markers.end(), *d.id) != detected_markers.end()) *d.id = -1;
  }
  detected_markers.clear();
  bool ambiguous = false;
  for (Detect& d : detects) {
    if (*d.id >= 0) continue;
    for (std::string_view text : d.texts)
      if (TokenId id = find(text); id >= 0 && (promote_markers || (attrs[id] & kAttrControl))) d.candidates.push_back(id);
    ambiguous |= d.candidates.size() > 1;
  }
  if (ambiguous) {
    // llama.cpp takes the first candidate in the iteration order of its
    // std::unordered_map<std::string, int>, filled in id order. A map filled
    // the same way iterates the same way (with libstdc++), so the same token
    // wins where a vocab holds two (Qwen: <|im_end|> and <|endoftext|>).
    // (The allocator does not change the order; the arena makes filling it cheap.)
    std::pmr::monotonic_buffer_resource arena(static_cast<std::size_t>(n) * 48);
    std::pmr::unordered_map<std::string_view, TokenId> ordered(&arena);
    for (std::int64_t i = 0; i < n; ++i) ordered.emplace(tokens[i], static_cast<TokenId>(i));
    std::vector<TokenId> all;
    for (const Detect& d : detects) all.insert(all.end(), d.candidates.begin(), d.candidates.end());
    std::sort(all.begin(), all.end());
    for (const auto& [text, id] : ordered) {
      if (!std::binary_search(all.begin(), all.end(), id)) continue;
      for (Detect& d : detects) {
        if (*d.id < 0 && std::find(d.candidates.begin(), d.candidates.end(), id) != d.candidates.end()) *d.id = id;
      }
    }
  }
  for (Detect& d : detects) {
    if (d.candidates.empty()) continue;
    if (*d.id < 0) *d.id = d.candidates.front();
    attrs[*d.id] |= kAttrControl;
    detected_markers.push_back(*d.id);
  }

  for (std::int64_t i = 0; i < n; ++i)
    if ((attrs[i] & kAttrControl) && tokens[i].find("unused") != std::string::npos) attrs[i] |= kAttrUnused;

  std::set<TokenId> eog;
  for (TokenId id : {fim_pad_id, fim_rep_id, fim_sep_id})
    if (id >= 0) eog.insert(id);
  for (std::string_view text : kEogTexts) {
    TokenId id = find(text);
    if (id < 0 || (!promote_markers && !(attrs[id] & kAttrControl))) continue;
    eog.insert(id);
    attrs[id] |= kAttrControl;
  }
  for (std::string_view text : kAlwaysRenderedTexts) {
    TokenId id = find(text);
    if (id >= 0 && promote_markers) attrs[id] = kAttrUserDefined;
  }
  for (TokenId id : {eos_id, eot_id, eom_id})
    if (id >= 0) eog.insert(id);

  // Vocabs where <|end|> ends a message but not the generation (o200k_harmony,
  // solar-open), and where </s> is an ordinary token (gemma4).
  auto in_eog = [&](std::string_view text) {
    TokenId id = find(text);
    return id >= 0 && eog.count(id) > 0;
  };
  const bool has_call = in_eog("<|call|>") || in_eog("<|calls|>");
  if (in_eog("<|end|>") && ((in_eog("<|return|>") && has_call) || (has_call && in_eog("<|flush|>")))) {
    TokenId end = find("<|end|>");
    eog.erase(end);
    attrs[end] = kAttrUserDefined;
  }
  if (in_eog("<|tool_response>") && in_eog("</s>")) {
    TokenId s = find("</s>");
    eog.erase(s);
    attrs[s] = kAttrNormal;
  }
  end_of_generation_ids.assign(eog.begin(), eog.end());
}

}  // namespace folio
