// The dense linear algebra of the calibrated quantizers (model/gptq.h,
// model/awq.h), on OpenBLAS: the one place folio calls BLAS or LAPACK.
// Matrices are row-major floats.
#pragma once

#include <cstdint>
#include <vector>

namespace folio::linalg {

// Whether this build has OpenBLAS (a build from a dependency kit may not).
bool available();
// Throws an Error that says what to install where available() is false;
// every function below does the same.
void require();

// The upper triangle (j >= i) of h ([cols, cols]) += x^T x, x: [rows, cols].
void add_gram(float* h, const float* x, std::int64_t rows, std::int64_t cols);

// h ([n, n], symmetric positive definite) becomes the upper-triangular U with
// U^T U = h^-1 (zeros below the diagonal). false, h undefined, where h is
// not positive definite.
bool inverse_upper_factor(std::vector<float>& h, std::int64_t n);

// c ([m, n], row stride ldc) -= a ([m, k], stride lda) * b ([k, n], stride ldb).
void subtract_product(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda, const float* b,
                      std::int64_t ldb, float* c, std::int64_t ldc);

// sum over the rows d_r of d ([rows, cols]) of d_r^T h d_r, h: [cols, cols]
// whole (both triangles).
double sum_of_quadratic_forms(const float* d, std::int64_t rows, std::int64_t cols, const float* h);

}  // namespace folio::linalg
