#include "core/version.h"

namespace folio {

const char* version_string() { return FOLIO_VERSION; }
const char* git_commit() { return FOLIO_GIT_COMMIT; }

}  // namespace folio
