#include "core/read_file.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace folio {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}", path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace folio
