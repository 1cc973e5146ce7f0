// IncrementalDecoder: turns generated token ids into text one token at a time
// for streaming. It never emits part of a UTF-8 character: bytes that may still
// complete one are held back; bytes that can no longer be valid, and whatever
// is held at flush(), come out as U+FFFD. Invariant: the concatenation of all
// push() results and flush() equals utf8::replace_invalid(tokenizer.decode(ids)).
#pragma once

#include <string>

#include "tokenizer/space_cleaner.h"
#include "tokenizer/tokenizer.h"

namespace folio {

class IncrementalDecoder {
 public:
  IncrementalDecoder(const Tokenizer& tokenizer, bool render_special);

  // The text this token completes (valid UTF-8, possibly empty).
  std::string push(TokenId id);
  // The rest; the decoder then starts a new stream.
  std::string flush();

  // Bytes held back, waiting for the rest of a character.
  std::size_t num_pending_bytes() const { return pending_.size(); }

 private:
  std::string take_complete();

  const Tokenizer& tokenizer_;
  bool render_special_;
  bool first_ = true;
  SpaceCleaner cleaner_;  // used for clean_spaces vocabs
  std::string pending_;
};

}  // namespace folio
