// SpaceCleaner: the clean-up llama.cpp's detokenizer applies for vocabs with
// clean_spaces (Hugging Face's clean_up_tokenization_spaces), fed a piece at a
// time: " ?", " !", " ." and " ," lose their space, " ' " becomes "'", and
// " 's", " 'm", " 're", " 've" lose their space, in three passes in that order.
// Invariant: the concatenated output of feed() calls and finish() equals the
// batch clean-up of the concatenated input, whatever the piece boundaries.
#pragma once

#include <string>
#include <string_view>

namespace folio {

class SpaceCleaner {
 public:
  // Returns the output that the input so far settles; holds back up to three
  // bytes that later input may still change.
  std::string feed(std::string_view bytes);
  // Returns the rest and starts over.
  std::string finish();

  static std::string clean(std::string_view bytes);

 private:
  // Each pass keeps its unsettled input in a buffer and moves settled output on.
  static void pass_punctuation(std::string& in, std::string& out, bool final);
  static void pass_lone_apostrophe(std::string& in, std::string& out, bool final);
  static void pass_contraction(std::string& in, std::string& out, bool final);
  std::string run(std::string_view bytes, bool final);

  std::string pending1_, pending2_, pending3_;
};

}  // namespace folio
