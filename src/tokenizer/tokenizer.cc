#include "tokenizer/tokenizer.h"

#include <cstdlib>
#include <deque>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/byte_pair_encoder.h"
#include "tokenizer/nfc.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/sentence_piece_encoder.h"
#include "tokenizer/space_cleaner.h"
#include "tokenizer/special_token_partition.h"

namespace folio {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space
// Words up to this many bytes are remembered for the rest of an encode call.
constexpr std::size_t kMaxCachedWordBytes = 64;

// The text llama.cpp's byte-level path sees: its lenient decoding written back
// as UTF-8 (bad bytes become U+FFFD; overlong forms are re-encoded short).
// Returns `text` itself when it is valid UTF-8, which decodes to itself.
std::string_view rebuild_text(std::string_view text, std::string& storage) {
  if (utf8::is_valid(text)) return text;
  storage.clear();
  storage.reserve(text.size() + 8);
  for (std::size_t pos = 0; pos < text.size();) {
    char32_t cp = utf8::decode_lenient(text, pos);
    // llama.cpp throws on these (a four-byte form above U+10FFFF); folio reads U+FFFD.
    if (cp > 0x10FFFF) cp = utf8::kReplacement;
    utf8::append(storage, cp);
  }
  return storage;
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, pos)) {
    out.append(text, pos, at - pos).append(to);
    pos = at + from.size();
  }
  out.append(text, pos);
  text.swap(out);
}

}  // namespace

// Buffers for one encode() call.
struct EncodeState {
  std::vector<SpecialTokenPartition::Fragment> fragments;
  PreTokenizer::Scratch pre_scratch;
  std::vector<PreTokenizer::Piece> pieces;
  BytePairEncoder::Scratch bpe_scratch;
  SentencePieceEncoder::Scratch spm_scratch;
  std::deque<std::string> rebuilt;  // rebuilt fragments; the cache's keys point into them
  std::unordered_map<std::string_view, std::pair<std::uint32_t, std::uint32_t>> word_cache;  // -> cached_ids span
  std::vector<TokenId> cached_ids;
  std::string text;
};

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::create(Vocab vocab) {
  if (vocab.attrs.size() != vocab.tokens.size() || vocab.token_index.size() != vocab.tokens.size())
    vocab.finish();
  std::unique_ptr<Tokenizer> t(new Tokenizer(std::move(vocab)));
  t->partition_ = std::make_unique<SpecialTokenPartition>(t->vocab_);
  if (t->vocab_.kind == VocabKind::kBytePairGpt2) {
    t->pre_tokenizer_ = t->vocab_.pre_regexes.empty() ? std::make_unique<PreTokenizer>(t->vocab_.pre_kind)
                                                      : std::make_unique<PreTokenizer>(t->vocab_.pre_regexes);
    t->byte_pair_ = std::make_unique<BytePairEncoder>(t->vocab_);
  } else {
    t->sentence_piece_ = std::make_unique<SentencePieceEncoder>(t->vocab_);
  }
  return t;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  return encode(text, add_special, parse_special, {});
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special,
                                       std::span<const TextRange> literal) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  EncodeState state;
  partition_->split(text, parse_special, state.fragments, literal);

  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos_id);
  bool previous_special = true;  // SentencePiece: a run after a special token (or at the start) gets a space
  for (const auto& f : state.fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      previous_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.begin, f.end - f.begin);
    if (byte_pair_) {
      encode_byte_level(raw, out, state);
    } else {
      std::string& s = state.text;
      s.clear();
      if (vocab_.add_space_prefix && previous_special) s += ' ';
      s.append(raw);
      replace_all(s, " ", kSpaceMark);
      sentence_piece_->encode(s, out, state.spm_scratch);
    }
    previous_special = false;
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos_id);
  return out;
}

void Tokenizer::encode_byte_level(std::string_view raw, std::vector<TokenId>& out, EncodeState& state) const {
  std::string storage;
  std::string_view text = rebuild_text(raw, storage);
  if (vocab_.normalize_nfc && !nfc::is_quick_yes(text)) {
    storage = nfc::normalize(text);
    text = storage;
  }
  if (!storage.empty() && text.data() == storage.data()) {
    state.rebuilt.push_back(std::move(storage));
    text = state.rebuilt.back();
  }
  pre_tokenizer_->split(text, state.pieces, state.pre_scratch);
  for (const PreTokenizer::Piece& p : state.pieces) {
    const std::string_view word = text.substr(p.begin, p.end - p.begin);
    if (word.size() < 2 || word.size() > kMaxCachedWordBytes) {
      byte_pair_->encode_word(word, out, state.bpe_scratch);
      continue;
    }
    auto it = state.word_cache.find(word);
    if (it != state.word_cache.end()) {
      const auto [offset, count] = it->second;
      out.insert(out.end(), state.cached_ids.begin() + offset, state.cached_ids.begin() + offset + count);
      continue;
    }
    const std::size_t before = out.size();
    byte_pair_->encode_word(word, out, state.bpe_scratch);
    const auto offset = static_cast<std::uint32_t>(state.cached_ids.size());
    state.cached_ids.insert(state.cached_ids.end(), out.begin() + before, out.end());
    state.word_cache.emplace(word, std::pair{offset, static_cast<std::uint32_t>(out.size() - before)});
  }
}

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const {
  if (!vocab_.contains(id))
    fail("token id {} is outside the vocab ({} tokens); it does not come from this model's tokenizer", id,
         vocab_.size());
  const TokenAttrs attrs = vocab_.attrs[id];
  const std::string& text = vocab_.tokens[id];
  if (attrs & (kAttrUnknown | kAttrControl | kAttrUserDefined)) {
    if (!render_special && (attrs & (kAttrUnknown | kAttrControl))) return {};
    return text;
  }
  if (attrs & kAttrNormal) {
    std::string piece;
    if (sentence_piece_) {
      piece = text;
      replace_all(piece, kSpaceMark, " ");
      return piece;
    }
    // Byte-level: each character stands for a byte; llama.cpp marks the ones
    // that stand for none.
    const ByteLevelMap& map = byte_pair_->byte_map();
    for (std::size_t pos = 0; pos < text.size();) {
      const char32_t cp = utf8::decode_lenient(text, pos);
      const int byte = map.decode(cp);
      if (byte >= 0) {
        piece += static_cast<char>(byte);
        continue;
      }
      std::string bytes;  // bytes that are not UTF-8 were read as U+FFFD
      utf8::append(bytes, cp);
      piece += "[UNK_BYTE_0x";
      for (char c : bytes) piece += fmt::format("{:02x}", static_cast<unsigned char>(c));
      piece += text;
      piece += ']';
    }
    return piece;
  }
  if (attrs & kAttrByte) {
    // "<0xAB>": llama.cpp reads the two characters after "<0x" as hex.
    const std::string hex = text.size() >= 5 ? text.substr(3, 2) : std::string();
    return std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
  }
  return {};  // unused and undefined tokens have no text
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool render_special) const {
  std::string text;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::string piece = token_to_piece(ids[i], render_special);
    if (i == 0 && vocab_.add_space_prefix && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    text += piece;
  }
  return vocab_.clean_spaces ? SpaceCleaner::clean(text) : text;
}

}  // namespace folio
