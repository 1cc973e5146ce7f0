// The whole of a (small) text file as a string.
#pragma once

#include <string>

namespace folio {

// Throws Error naming the path when the file cannot be read.
std::string read_file(const std::string& path);

}  // namespace folio
