// Histogram: counts of observations in fixed buckets (upper bounds, as
// Prometheus histograms have them), with their sum. Not thread-safe: the
// owner guards it.
#pragma once

#include <cstdint>
#include <vector>

namespace folio {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1) {}

  void observe(double value) {
    std::size_t i = 0;
    while (i < bounds_.size() && value > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += value;
    ++count_;
  }

  const std::vector<double>& bounds() const { return bounds_; }
  // counts()[i]: observations in (bounds[i-1], bounds[i]]; the last is (bounds.back(), +inf).
  const std::vector<std::uint64_t>& counts() const { return counts_; }
  double sum() const { return sum_; }
  std::uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

}  // namespace folio
