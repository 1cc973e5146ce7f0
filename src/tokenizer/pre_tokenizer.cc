#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>

#include "core/error.h"
#include "core/utf8.h"

namespace folio {
namespace {

// The regexes of llama.cpp's llm_tokenizer_bpe for each family. Case-insensitive
// groups are spelled out, as llama.cpp spells them.
constexpr const char* kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kLlama3Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// llama.cpp's class of a code point, as far as the regexes can tell classes apart.
enum class CharClass : std::uint8_t { kLetter, kMark, kNumber, kPunctuation, kSymbol, kOther };

// Code points that llama.cpp's tables (Unicode 15.1) class differently from
// PCRE2 10.42's (Unicode 14.0): letters, marks, digits and symbols new in 15.x,
// and U+180E, which PCRE2 still counts as white space. Found by comparing the
// two over every code point.
struct ClassOverride {
  char32_t first;
  char32_t last;
  CharClass llama_class;
};
constexpr CharClass kL = CharClass::kLetter;
constexpr CharClass kM = CharClass::kMark;
constexpr CharClass kN = CharClass::kNumber;
constexpr CharClass kP = CharClass::kPunctuation;
constexpr CharClass kS = CharClass::kSymbol;
constexpr CharClass kO = CharClass::kOther;
constexpr std::array<ClassOverride, 47> kClassOverrides = {{
    {0x0CF3, 0x0CF3, kM},   {0x0ECE, 0x0ECE, kM},   {0x180E, 0x180E, kO},   {0x2FFC, 0x2FFF, kS},
    {0x31EF, 0x31EF, kS},   {0x10EFD, 0x10EFF, kM}, {0x1123F, 0x11240, kL}, {0x11241, 0x11241, kM},
    {0x11B00, 0x11B09, kP}, {0x11F00, 0x11F01, kM}, {0x11F02, 0x11F02, kL}, {0x11F03, 0x11F03, kM},
    {0x11F04, 0x11F10, kL}, {0x11F12, 0x11F33, kL}, {0x11F34, 0x11F3A, kM}, {0x11F3E, 0x11F42, kM},
    {0x11F43, 0x11F4F, kP}, {0x11F50, 0x11F59, kN}, {0x1342F, 0x1342F, kL}, {0x13440, 0x13440, kM},
    {0x13441, 0x13446, kL}, {0x13447, 0x13455, kM}, {0x1B132, 0x1B132, kL}, {0x1B155, 0x1B155, kL},
    {0x1D2C0, 0x1D2D3, kN}, {0x1DF25, 0x1DF2A, kL}, {0x1E030, 0x1E06D, kL}, {0x1E08F, 0x1E08F, kM},
    {0x1E4D0, 0x1E4EB, kL}, {0x1E4EC, 0x1E4EF, kM}, {0x1E4F0, 0x1E4F9, kN}, {0x1F6DC, 0x1F6DC, kS},
    {0x1F774, 0x1F776, kS}, {0x1F77B, 0x1F77F, kS}, {0x1F7D9, 0x1F7D9, kS}, {0x1FA75, 0x1FA77, kS},
    {0x1FA87, 0x1FA88, kS}, {0x1FAAD, 0x1FAAF, kS}, {0x1FABB, 0x1FABD, kS}, {0x1FABF, 0x1FABF, kS},
    {0x1FACE, 0x1FACF, kS}, {0x1FADA, 0x1FADB, kS}, {0x1FAE8, 0x1FAE8, kS}, {0x1FAF7, 0x1FAF8, kS},
    {0x2B739, 0x2B739, kL}, {0x2EBF0, 0x2EE5D, kL}, {0x31350, 0x323AF, kL},
}};

// Stand-ins PCRE2 classes as wanted, by class and UTF-8 length (3 or 4).
char32_t stand_in(CharClass c, std::size_t length) {
  const bool three = length == 3;
  switch (c) {
    case CharClass::kLetter: return three ? 0x4E00 : 0x20000;
    case CharClass::kMark: return three ? 0x20D0 : 0x1D165;
    case CharClass::kNumber: return three ? 0x2460 : 0x1D7CE;
    case CharClass::kPunctuation: return three ? 0x2010 : 0x10100;
    case CharClass::kSymbol: return three ? 0x2600 : 0x1F600;
    case CharClass::kOther: return three ? 0xE000 : 0xF0000;
  }
  return 0xE000;
}

const ClassOverride* find_override(char32_t cp) {
  if (cp < kClassOverrides.front().first || cp > kClassOverrides.back().last) return nullptr;
  auto it = std::upper_bound(kClassOverrides.begin(), kClassOverrides.end(), cp,
                             [](char32_t c, const ClassOverride& o) { return c < o.first; });
  if (it == kClassOverrides.begin()) return nullptr;
  --it;
  return cp <= it->last ? &*it : nullptr;
}

// The text PCRE2 matches: `text` with surrogates and overridden code points
// replaced by stand-ins of the same length. Returns `text` itself when nothing
// needs replacing.
std::string_view text_to_match(std::string_view text, std::string& storage) {
  bool copied = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const unsigned char lead = static_cast<unsigned char>(text[pos]);
    const std::size_t length = utf8::length_from_lead(lead);
    if (lead < 0xE0) {
      pos += length;
      continue;
    }
    std::size_t next = pos;
    const char32_t cp = utf8::decode_lenient(text, next);
    char32_t replacement = 0;
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      replacement = stand_in(CharClass::kOther, 3);
    } else if (const ClassOverride* o = find_override(cp)) {
      replacement = stand_in(o->llama_class, next - pos);
    }
    if (replacement != 0) {
      if (!copied) {
        storage.assign(text);
        copied = true;
      }
      std::string bytes;
      utf8::append(bytes, replacement);
      FOLIO_CHECK(bytes.size() == next - pos);
      storage.replace(pos, bytes.size(), bytes);
    }
    pos = next;
  }
  return copied ? std::string_view(storage) : text;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::Scratch::Scratch() : match_data_(pcre2_match_data_create(1, nullptr)) {
  if (match_data_ == nullptr) fail("out of memory creating PCRE2 match data");
}

PreTokenizer::Scratch::~Scratch() { pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_)); }

std::vector<std::string> PreTokenizer::regexes(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kGpt2: return {kGpt2Regex};
    case PreTokenizerKind::kSmolLM: return {"\\p{N}", kGpt2Regex};
    case PreTokenizerKind::kLlama3: return {kLlama3Regex};
    case PreTokenizerKind::kQwen2: return {kQwen2Regex};
    case PreTokenizerKind::kDefault:
      return {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Regex, "\\p{N}+", "[0-9][0-9][0-9]"};
  }
  return {};
}

PreTokenizer::PreTokenizer(PreTokenizerKind kind) : PreTokenizer(regexes(kind)) {}

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns) {
    auto regex = std::make_unique<Regex>();
    int error = 0;
    PCRE2_SIZE offset = 0;
    regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (regex->code == nullptr)
      fail("pre-tokenizer regex \"{}\" does not compile at offset {}: {}", pattern, offset, pcre2_message(error));
    // Without JIT (an unsupported CPU) pcre2_match interprets: slower, same result.
    pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);
    regexes_.push_back(std::move(regex));
  }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<Piece>& pieces, Scratch& scratch) const {
  pieces.clear();
  if (text.empty()) return;
  FOLIO_CHECK(text.size() < (std::size_t{1} << 32));
  const std::string_view subject_text = text_to_match(text, scratch.match_text_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(subject_text.data());
  auto* match_data = static_cast<pcre2_match_data*>(scratch.match_data_);
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);

  pieces.push_back({0, static_cast<std::uint32_t>(text.size())});
  std::vector<Piece>& next = scratch.next_;
  for (const auto& regex : regexes_) {
    next.clear();
    for (const Piece& piece : pieces) {
      // Each piece is its own subject: lookarounds do not see past its ends.
      const PCRE2_SPTR start = subject + piece.begin;
      const PCRE2_SIZE length = piece.end - piece.begin;
      PCRE2_SIZE done = 0;    // end of what has been emitted
      PCRE2_SIZE search = 0;  // where the next match may start
      while (search < length) {
        const int rc = pcre2_match(regex->code, start, length, search, PCRE2_NO_UTF_CHECK, match_data, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) fail("pre-tokenizer regex failed: {} (PCRE2 error {})", pcre2_message(rc), rc);
        const PCRE2_SIZE match_begin = ovector[0];
        const PCRE2_SIZE match_end = ovector[1];
        if (match_end == match_begin) {  // an empty match splits nothing
          search = match_begin + utf8::length_from_lead(start[match_begin]);
          continue;
        }
        if (match_begin > done)
          next.push_back({piece.begin + static_cast<std::uint32_t>(done),
                          piece.begin + static_cast<std::uint32_t>(match_begin)});
        next.push_back({piece.begin + static_cast<std::uint32_t>(match_begin),
                        piece.begin + static_cast<std::uint32_t>(match_end)});
        done = search = match_end;
      }
      if (done < length) next.push_back({piece.begin + static_cast<std::uint32_t>(done), piece.end});
    }
    pieces.swap(next);
  }
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  Scratch scratch;
  std::vector<Piece> pieces;
  split(text, pieces, scratch);
  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (const Piece& p : pieces) words.emplace_back(text.substr(p.begin, p.end - p.begin));
  return words;
}

}  // namespace folio
