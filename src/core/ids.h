// The words every module shares: a token's id and the paged KV cache's
// default block size (kv/, the backends' KV pools, the engine and the CLI
// agree on both without depending on each other).
#pragma once

#include <cstdint>

namespace folio {

using TokenId = std::int32_t;  // a token of the model's vocabulary

inline constexpr int kDefaultBlockSize = 16;  // tokens per KV cache block

}  // namespace folio
