// dummy_vocab: the tokenizer of a --load-format dummy model, which has no
// file to read one from: byte-level BPE over the 256 byte tokens (one merge,
// so that the vocab is well formed), an end-of-text control token, and
// unused tokens up to the model's vocabulary size. Any text encodes (one
// token a byte) and every id decodes, so run, serve and bench work as usual.
#pragma once

#include <cstdint>

#include "tokenizer/vocab.h"

namespace folio {

// A finished vocab of `size` tokens (at least 258).
Vocab dummy_vocab(std::int64_t size);

}  // namespace folio
