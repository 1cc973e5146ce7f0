#include "engine/calibration.h"

#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace folio {
namespace {

// Sums x^2 per input column of each weight, keyed by the weight's storage.
class ActivationSquares final : public MatmulObserver {
 public:
  struct Sums {
    std::vector<double> squares;
    std::int64_t rows = 0;
  };

  void on_matmul(const Tensor& w, const Tensor& x) override {
    FOLIO_CHECK(x.dtype == DType::F32 && x.device == Device::kCpu);  // a host copy (ObservingBackend)
    const std::int64_t cols = x.cols(), rows = x.rows();
    Sums& s = sums_[w.data];
    if (s.squares.empty()) s.squares.assign(static_cast<std::size_t>(cols), 0.0);
    FOLIO_CHECK(static_cast<std::int64_t>(s.squares.size()) == cols);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* row = static_cast<const float*>(x.row(r));
      for (std::int64_t c = 0; c < cols; ++c) s.squares[static_cast<std::size_t>(c)] += static_cast<double>(row[c]) * row[c];
    }
    s.rows += rows;
  }

  // A stacked expert weight gets one set of sums over the rows of all its
  // experts (its columns are the same inputs), kept under the whole tensor.
  void on_expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets) override { on_matmul(w, x); }

  const Sums* find(const void* weight) const {
    auto it = sums_.find(weight);
    return it == sums_.end() ? nullptr : &it->second;
  }

 private:
  std::unordered_map<const void*, Sums> sums_;
};

}  // namespace

CalibrationResult calibrate(ModelSessionOptions session_options, const std::string& text, PerplexityOptions windows,
                            const PerplexityProgress& progress) {
  ActivationSquares squares;
  session_options.matmul_observer = &squares;
  std::shared_ptr<ModelSession> session = open_model_session(session_options);
  const std::vector<TokenId> tokens = session->tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/false);
  const auto n = static_cast<std::int64_t>(tokens.size());
  if (windows.stride == 0 && n < 2 * windows.ctx) windows.ctx = n / 2;
  if (windows.ctx < 16) fail("the calibration text has {} tokens; it needs at least 32", n);
  const PerplexityResult ppl = compute_perplexity(*session, tokens, windows, progress);

  CalibrationResult result;
  result.perplexity = ppl.perplexity();
  result.windows = ppl.num_chunks;
  const Weights& weights = *session->loaded.weights;
  for (const std::string& name : weights.names()) {
    const ActivationSquares::Sums* s = squares.find(weights.find(name)->data);
    if (s == nullptr || s->rows == 0) continue;
    std::vector<float>& mean = result.importance.columns[name];
    mean.resize(s->squares.size());
    for (std::size_t c = 0; c < mean.size(); ++c)
      mean[c] = static_cast<float>(s->squares[c] / static_cast<double>(s->rows));
  }
  result.importance.tokens = ppl.num_chunks * windows.ctx;
  return result;
}

}  // namespace folio
