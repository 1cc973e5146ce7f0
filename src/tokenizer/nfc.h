// NFC: Unicode Normalization Form C (canonical decomposition, canonical
// ordering, canonical composition; UAX #15), for tokenizers whose
// tokenizer.json asks for it. Pure functions over UTF-8; the tables come from
// scripts/make_nfc_table.py.
#pragma once

#include <string>
#include <string_view>

namespace folio::nfc {

// True when `text` is certainly NFC already: every code point is below
// U+0300, where no character decomposes or combines.
bool is_quick_yes(std::string_view text);

// The NFC form of `text`. Bytes that are not UTF-8 pass through as U+FFFD.
std::string normalize(std::string_view text);

}  // namespace folio::nfc
