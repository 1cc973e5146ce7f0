#include "tokenizer/space_cleaner.h"

namespace folio {
namespace {

bool is_closing_punctuation(char c) { return c == '?' || c == '!' || c == '.' || c == ','; }

}  // namespace

// Pass 1: a space right before ? ! . or , goes.
void SpaceCleaner::pass_punctuation(std::string& in, std::string& out, bool final) {
  std::size_t i = 0;
  while (i < in.size()) {
    if (in[i] == ' ') {
      if (i + 1 >= in.size()) {
        if (!final) break;
      } else if (is_closing_punctuation(in[i + 1])) {
        ++i;
        continue;
      }
    }
    out += in[i++];
  }
  in.erase(0, i);
}

// Pass 2: " ' " becomes "'" (the space after it is consumed with it, so it
// cannot be the space before a following apostrophe).
void SpaceCleaner::pass_lone_apostrophe(std::string& in, std::string& out, bool final) {
  std::size_t i = 0;
  while (i < in.size()) {
    if (in[i] == ' ' && (i + 1 >= in.size() || in[i + 1] == '\'')) {
      if (i + 2 >= in.size()) {
        if (!final) break;
      } else if (in[i + 2] == ' ') {
        out += '\'';
        i += 3;
        continue;
      }
    }
    out += in[i++];
  }
  in.erase(0, i);
}

// Pass 3: " 's", " 'm", " 're" and " 've" lose their space (" 't", " 'd" and
// " 'll" keep it).
void SpaceCleaner::pass_contraction(std::string& in, std::string& out, bool final) {
  std::size_t i = 0;
  while (i < in.size()) {
    if (in[i] == ' ' && (i + 1 >= in.size() || in[i + 1] == '\'')) {
      if (i + 2 >= in.size()) {
        if (!final) break;
      } else {
        const char x1 = in[i + 2];
        if (x1 == 's' || x1 == 'm') {
          ++i;  // drop the space; the apostrophe and x1 follow as usual
          continue;
        }
        if (x1 == 'r' || x1 == 'v') {
          if (i + 3 >= in.size()) {
            if (!final) break;
          } else if (in[i + 3] == 'e') {
            ++i;
            continue;
          }
        }
      }
    }
    out += in[i++];
  }
  in.erase(0, i);
}

std::string SpaceCleaner::run(std::string_view bytes, bool final) {
  std::string out;
  pending1_.append(bytes);
  pass_punctuation(pending1_, pending2_, final);
  pass_lone_apostrophe(pending2_, pending3_, final);
  pass_contraction(pending3_, out, final);
  return out;
}

std::string SpaceCleaner::feed(std::string_view bytes) { return run(bytes, false); }

std::string SpaceCleaner::finish() {
  std::string out = run({}, true);
  pending1_.clear();
  pending2_.clear();
  pending3_.clear();
  return out;
}

std::string SpaceCleaner::clean(std::string_view bytes) {
  SpaceCleaner cleaner;
  std::string out = cleaner.feed(bytes);
  out += cleaner.finish();
  return out;
}

}  // namespace folio
