// AWQ-style scaling (Lin et al., 2023) for GGUF models: the input channels
// of the matrices that read a norm's output (attention q, k, v after
// attn_norm; FFN gate and up after ffn_norm) or up's output (FFN down, in a
// gated FFN) are multiplied by s_c before quantizing, and the norm's weight
// (or up's row c) by 1/s_c, which leaves the model's function unchanged while
// the channels that meet large activations get finer steps. s_c =
// rms_c^alpha over calibration, alpha searched per group for the least output
// error over the calibration inputs; alpha = 0 (no scaling) is one choice, so
// on that error it never loses to the block encoder alone.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "model/gguf_file.h"
#include "offline/quantizer.h"

namespace folio {

struct AwqGroup {
  std::string input;  // the norm (or matrix) whose output the group reads: its rows get 1/s
  std::vector<std::string> matrices;  // their columns get s
  double alpha = 0.0;
  double error = 0.0;      // sum over the group of the output error at alpha
  double unscaled = 0.0;   // the same at alpha = 0
};

struct AwqScales {
  std::unordered_map<std::string, std::vector<float>> columns;  // weight -> [cols]: multiply column c
  std::unordered_map<std::string, std::vector<float>> rows;     // tensor -> [rows]: multiply row (element) r
  std::vector<AwqGroup> groups;                                 // every group searched, scaled or not
};

// The scales for `in` quantized as planned, from calibration statistics
// with covariances (engine/calibration.h). Groups whose tensors are missing,
// not planned to be quantized, or lack statistics are left out.
AwqScales search_awq_scales(const GgufFile& in, const std::vector<TensorQuantPlan>& plans,
                            const ImportanceMatrix& importance, ThreadPool& pool);

}  // namespace folio
