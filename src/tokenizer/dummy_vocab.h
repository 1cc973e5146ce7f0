// dummy_vocab: the tokenizer of a --load-format dummy model, which has no
// file to read one from: byte-level BPE over the 256 byte tokens with merges
// of letter pairs, an end-of-text control token, and unused tokens up to the
// model's vocabulary size. Any text encodes (English in about two characters
// a token) and every id decodes, so run, serve and bench work as usual.
#pragma once

#include <cstdint>

#include "tokenizer/vocab.h"

namespace folio {

// A finished vocab of `size` tokens (at least 1,024).
Vocab dummy_vocab(std::int64_t size);

}  // namespace folio
