// The ids the KV cache speaks in: blocks of the pool, tokens, sequences.
// A slot is one token's place in the pool: block_id * block_size + offset.
#pragma once

#include <cstdint>

#include "core/ids.h"

namespace folio {

using BlockId = std::int32_t;     // index of a block in the pool, 0 .. num_blocks - 1
using SequenceId = std::uint64_t;  // the engine's id of one sequence (a completion of a request)
using SlotId = std::int64_t;      // block_id * block_size + offset

}  // namespace folio
