#include "tokenizer/nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/utf8.h"

namespace folio::nfc {
namespace {

struct CombiningRange {
  char32_t first;
  char32_t last;
  std::uint8_t ccc;
};
struct Decomposition {
  char32_t cp;
  char32_t first;
  char32_t second;  // 0 for a one-character decomposition
};
struct Composition {
  char32_t first;
  char32_t second;
  char32_t composite;
};

#include "tokenizer/nfc_table.inl"

// Hangul syllables decompose and compose by formula (Unicode ch. 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

int combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  auto it = std::upper_bound(std::begin(kCombiningClasses), std::end(kCombiningClasses), cp,
                             [](char32_t c, const CombiningRange& r) { return c < r.first; });
  if (it == std::begin(kCombiningClasses)) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  auto it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                             [](const Decomposition& d, char32_t c) { return d.cp < c; });
  if (it == std::end(kDecompositions) || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  decompose(it->first, out);
  if (it->second != 0) decompose(it->second, out);
}

// The primary composite of (a, b), or 0.
char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  auto it = std::lower_bound(std::begin(kCompositions), std::end(kCompositions), std::pair{a, b},
                             [](const Composition& c, std::pair<char32_t, char32_t> key) {
                               return c.first != key.first ? c.first < key.first : c.second < key.second;
                             });
  return it != std::end(kCompositions) && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

bool is_quick_yes(std::string_view text) {
  // U+0300 is the first code point of lead byte 0xCC; continuation bytes are below it.
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0xCC; });
}

std::string normalize(std::string_view text) {
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) decompose(utf8::decode_lenient(text, pos), cps);

  // Canonical ordering: a stable sort of each run of non-starters by class.
  for (std::size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < cps.size() && combining_class(cps[end]) != 0) ++end;
    std::stable_sort(cps.begin() + static_cast<std::ptrdiff_t>(i), cps.begin() + static_cast<std::ptrdiff_t>(end),
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = end;
  }

  // Canonical composition: each character joins the last starter unless a
  // character between them blocks it (one of the same or a higher class).
  std::vector<char32_t> out;
  out.reserve(cps.size());
  std::size_t starter = 0;
  bool have_starter = false;
  int last_class = -1;
  for (char32_t cp : cps) {
    const int cc = combining_class(cp);
    if (have_starter && (last_class < cc || last_class == 0)) {
      if (char32_t composite = compose(out[starter], cp); composite != 0) {
        out[starter] = composite;
        continue;
      }
    }
    if (cc == 0) {
      starter = out.size();
      have_starter = true;
    }
    last_class = cc;
    out.push_back(cp);
  }
  std::string result;
  result.reserve(text.size());
  for (char32_t cp : out) utf8::append(result, cp);
  return result;
}

}  // namespace folio::nfc
