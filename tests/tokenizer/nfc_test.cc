// NFC against Python's unicodedata.normalize("NFC", ...) on the cases that
// exercise each step: composition, Hangul by formula, singletons, canonical
// reordering, composition exclusions, blocking, leading non-starters.
#include "tokenizer/nfc.h"

#include <gtest/gtest.h>

namespace folio {
namespace {

TEST(Nfc, MatchesPythonUnicodedata) {
  struct Case {
    const char* in;
    const char* want;
  };
  const Case cases[] = {
      {"e\u0301", "\u00e9"},               // composes
      {"\u1100\u1161", "\uac00"},          // Hangul LV
      {"\u1100\u1161\u11a8", "\uac01"},    // Hangul LVT
      {"\uac00\u11a8", "\uac01"},          // LV + T
      {"\u212b", "\u00c5"},                // singleton
      {"a\u0323\u0302", "\u1ead"},         // already in canonical order
      {"a\u0302\u0323", "\u1ead"},         // reordered, then composed
      {"\u0958", "\u0915\u093c"},          // composition exclusion
      {"\u0344", "\u0308\u0301"},          // non-starter decomposition
      {"\u00c4\u0308x", "\u00c4\u0308x"},  // nothing left to compose
      {"\u0301a", "\u0301a"},              // leading non-starter
      {"e\u0301\u0301", "\u00e9\u0301"},   // the second mark is blocked
      {"plain ASCII, unchanged", "plain ASCII, unchanged"},
  };
  for (const Case& c : cases) EXPECT_EQ(nfc::normalize(c.in), c.want) << c.in;
}

TEST(Nfc, QuickCheckPassesOnlyTextBelowU0300) {
  EXPECT_TRUE(nfc::is_quick_yes("abc \u00e9\u00ff\u02ff"));
  EXPECT_FALSE(nfc::is_quick_yes("e\u0301"));
  EXPECT_FALSE(nfc::is_quick_yes("\uac00"));
}

}  // namespace
}  // namespace folio
