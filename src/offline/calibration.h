// Calibration for the quantizer: runs a model over text and records, for every
// matmul weight, the mean squared activation of each input column - how much
// an error in that column of the weight moves the output. Columns that meet
// large activations are the ones a quantizer must protect (model/quantizer.h).
#pragma once

#include <string>

#include "engine/model_session.h"
#include "offline/perplexity.h"
#include "offline/quantizer.h"

namespace folio {

struct CalibrationResult {
  ImportanceMatrix importance;
  double perplexity = 0;  // of the model over the calibration windows
  std::int64_t windows = 0;
};

// Opens the model of session_options with an observer on its matmuls and
// runs it over text in the windows of `windows` (llama-perplexity's chunks;
// a ctx larger than half the text is reduced to fit). With covariances, also
// the second moments of every 2-D weight's input, for GPTQ (model/gptq.h):
// cols^2 floats per distinct input, gigabytes for a 1.5B model.
CalibrationResult calibrate(ModelSessionOptions session_options, const std::string& text, PerplexityOptions windows,
                            const PerplexityProgress& progress = {}, bool covariances = false);

}  // namespace folio
