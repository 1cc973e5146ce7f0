#include "cli/commands.h"

namespace folio::cli {

void add_tokenize(CLI::App& app) {}

}  // namespace folio::cli
