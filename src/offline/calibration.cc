#include "offline/calibration.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace folio {
namespace {

// Sums x^2 per input column of each weight, keyed by the weight's storage,
// and where asked the whole x x^T of each weight's input.
class ActivationSquares final : public MatmulObserver {
 public:
  struct Sums {
    std::vector<double> squares;
    std::int64_t rows = 0;
    // Shared by the weights that read the same input (q, k and v; gate and
    // up), summed by the first of them.
    std::shared_ptr<InputCovariance> covariance;
    bool sums_covariance = false;
  };

  explicit ActivationSquares(bool covariances) : covariances_(covariances) {}

  void on_matmul(const Tensor& w, const Tensor& x) override {
    add_squares(w, x);
    if (covariances_) add_covariance(sums_[w.data], x);
  }

  // A stacked expert weight gets one set of sums over the rows of all its
  // experts (its columns are the same inputs), kept under the whole tensor;
  // no covariance (GPTQ quantizes 2-D weights).
  void on_expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets) override { add_squares(w, x); }

  const Sums* find(const void* weight) const {
    auto it = sums_.find(weight);
    return it == sums_.end() ? nullptr : &it->second;
  }

 private:
  void add_squares(const Tensor& w, const Tensor& x) {
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

  // A weight's first input decides whether it shares the covariance of the
  // weight just before it: the same bytes, the same input.
  void add_covariance(Sums& s, const Tensor& x) {
    const auto* data = static_cast<const std::uint8_t*>(x.data);
    if (!s.covariance) {
      if (last_covariance_ && last_covariance_->cols == x.cols() && last_x_.size() == x.bytes() &&
          std::equal(last_x_.begin(), last_x_.end(), data)) {
        s.covariance = last_covariance_;
      } else {
        s.covariance = std::make_shared<InputCovariance>();
        s.covariance->cols = x.cols();
        s.sums_covariance = true;
      }
    }
    if (s.sums_covariance) accumulate_covariance(*s.covariance, static_cast<const float*>(x.data), x.rows());
    last_x_.assign(data, data + x.bytes());
    last_covariance_ = s.covariance;
  }

  bool covariances_;
  std::unordered_map<const void*, Sums> sums_;
  std::vector<std::uint8_t> last_x_;  // the previous matmul's input
  std::shared_ptr<InputCovariance> last_covariance_;
};

}  // namespace

CalibrationResult calibrate(ModelSessionOptions session_options, const std::string& text, PerplexityOptions windows,
                            const PerplexityProgress& progress, bool covariances) {
  ActivationSquares squares(covariances);
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
    if (s->covariance) result.importance.covariances[name] = s->covariance;
  }
  result.importance.tokens = ppl.num_chunks * windows.ctx;
  return result;
}

}  // namespace folio
