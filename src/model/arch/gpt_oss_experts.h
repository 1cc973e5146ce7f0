// gpt-oss's experts as a Hugging Face checkpoint stores them, taken into
// folio's stacked GGUF layout at load: the fused gate/up projection
// (gate and up interleaved by output: even rows gate, odd rows up) split in
// two, the plain ones transposed from [experts, in, out] to [experts, out,
// in], and the released MXFP4 ones (`*_blocks` [experts, out, in / 32, 16]
// bytes and `*_scales` [experts, out, in / 32] E8M0 exponents) repacked into
// GGUF's MXFP4 blocks - the same 4.25 bits per weight, never widened.
#pragma once

#include "model/hf_checkpoint.h"
#include "model/weights.h"

namespace folio {

// Adds the folio tensors that the checkpoint tensor `t` holds, when it is
// one of a gpt-oss layer's expert tensors (mlp.experts.gate_up_proj, its
// _bias, _blocks and _scales; the same of down_proj): true when taken (a
// _scales tensor is read with its _blocks), false for any other name.
// Throws an Error naming the tensor when its type or shape is not the
// layout's.
bool add_gpt_oss_expert_tensor(Weights& w, const HfCheckpoint& c, const SafetensorsTensor& t);

// Repacks one row of MXFP4 as gpt-oss checkpoints store it (`blocks`: 16
// bytes per 32 numbers, element 2i in the low nibble of byte i and 2i + 1
// in its high one; `scales`: one E8M0 byte per block) into GGUF MXFP4 blocks
// (17 bytes: the scale, then element j in the low nibble of byte j and
// j + 16 in its high one). The codes are the same E2M1 codes, and GGUF's
// doubled grid with its halved scale gives the same numbers.
void repack_mxfp4_row(const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t num_blocks,
                      std::uint8_t* out);

}  // namespace folio
