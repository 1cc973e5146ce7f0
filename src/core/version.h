// The build's version and commit, for `folio --version` and GET /version.
#pragma once

namespace folio {

const char* version_string();
const char* git_commit();

}  // namespace folio
