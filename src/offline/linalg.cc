#include "offline/linalg.h"

#include "core/error.h"

#ifdef FOLIO_HAVE_OPENBLAS
#include <cblas.h>
#include <f77blas.h>
#endif

namespace folio::linalg {

#ifdef FOLIO_HAVE_OPENBLAS

namespace {
blasint dim(std::int64_t n) {
  FOLIO_CHECK(n >= 0 && n <= 0x7fffffff);
  return static_cast<blasint>(n);
}
}  // namespace

bool available() { return true; }
void require() {}

void add_gram(float* h, const float* x, std::int64_t rows, std::int64_t cols) {
  if (rows == 0 || cols == 0) return;
  cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, dim(cols), dim(rows), 1.0f, x, dim(cols), 1.0f, h, dim(cols));
}

// With J the reversal, J h J = L L^T gives h = M M^T for the upper M = J L J,
// so U = M^-1 = J L^-1 J: one Cholesky factor and one triangular inverse.
bool inverse_upper_factor(std::vector<float>& h, std::int64_t n) {
  const auto size = static_cast<std::size_t>(n);
  FOLIO_CHECK(h.size() == size * size);
  std::vector<float> reversed(size * size);
  for (std::size_t i = 0; i < size; ++i)
    for (std::size_t j = 0; j < size; ++j) reversed[i * size + j] = h[(size - 1 - i) * size + (size - 1 - j)];
  // LAPACK is column-major: its upper factor of the symmetric matrix is, read
  // row-major, the lower L; its inverse likewise L^-1.
  char upper = 'U', non_unit = 'N';
  blasint order = dim(n), info = 0;
  spotrf_(&upper, &order, reversed.data(), &order, &info);
  if (info != 0) return false;
  strtri_(&upper, &non_unit, &order, reversed.data(), &order, &info);
  if (info != 0) return false;
  for (std::size_t i = 0; i < size; ++i)
    for (std::size_t j = 0; j < size; ++j)
      h[i * size + j] = j >= i ? reversed[(size - 1 - i) * size + (size - 1 - j)] : 0.0f;
  return true;
}

void subtract_product(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda, const float* b,
                      std::int64_t ldb, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0 || k == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dim(m), dim(n), dim(k), -1.0f, a, dim(lda), b, dim(ldb), 1.0f,
              c, dim(ldc));
}

double sum_of_quadratic_forms(const float* d, std::int64_t rows, std::int64_t cols, const float* h) {
  const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  if (count == 0) return 0.0;
  std::vector<float> dh(count);  // [rows, cols] = d h
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dim(rows), dim(cols), dim(cols), 1.0f, d, dim(cols), h,
              dim(cols), 0.0f, dh.data(), dim(cols));
  double total = 0.0;
  for (std::size_t i = 0; i < count; ++i) total += static_cast<double>(dh[i]) * static_cast<double>(d[i]);
  return total;
}

#else  // no OpenBLAS

bool available() { return false; }

void require() {
  fail("this folio was built without OpenBLAS, which --method gptq and awq need; install Debian's "
       "libopenblas-dev (scripts/setup.sh does) and rebuild");
}

void add_gram(float*, const float*, std::int64_t, std::int64_t) { require(); }
bool inverse_upper_factor(std::vector<float>&, std::int64_t) {
  require();
  return false;
}
void subtract_product(std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, const float*, std::int64_t,
                      float*, std::int64_t) {
  require();
}
double sum_of_quadratic_forms(const float*, std::int64_t, std::int64_t, const float*) {
  require();
  return 0.0;
}

#endif

}  // namespace folio::linalg
