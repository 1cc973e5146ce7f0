#include "tokenizer/incremental_decoder.h"

#include "core/utf8.h"

namespace folio {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special) {}

std::string IncrementalDecoder::push(TokenId id) {
  std::string piece = tokenizer_.token_to_piece(id, render_special_);
  if (first_ && tokenizer_.vocab().add_space_prefix && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
  first_ = false;
  pending_ += tokenizer_.vocab().clean_spaces ? cleaner_.feed(piece) : piece;
  return take_complete();
}

std::string IncrementalDecoder::flush() {
  if (tokenizer_.vocab().clean_spaces) pending_ += cleaner_.finish();
  std::string out = utf8::replace_invalid(pending_);
  pending_.clear();
  first_ = true;
  return out;
}

std::string IncrementalDecoder::take_complete() {
  std::string out;
  std::size_t pos = 0;
  while (pos < pending_.size()) {
    const std::string_view rest = std::string_view(pending_).substr(pos);
    const utf8::Sequence s = utf8::next_sequence(rest);
    if (s.kind == utf8::Sequence::kIncomplete) break;
    if (s.kind == utf8::Sequence::kValid) {
      out.append(rest.substr(0, s.length));
    } else {
      out.append(utf8::kReplacementText);
    }
    pos += s.length;
  }
  pending_.erase(0, pos);
  return out;
}

}  // namespace folio
