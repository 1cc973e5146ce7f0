// loose_name: how preset names are matched - letters and digits only, lower
// case - so that "llama-2-7b", "Llama 2 7B" and "LLAMA_2_7B" name one preset.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace folio {

inline std::string loose_name(std::string_view name) {
  std::string out;
  for (char c : name)
    if (std::isalnum(static_cast<unsigned char>(c)))
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

}  // namespace folio
