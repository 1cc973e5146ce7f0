// The CPU backend's row-wise ops - RMSNorm, RoPE, gated activations,
// residual add, scale, KV cache writes - vectorised (AVX2) and split over
// rows. Each row's arithmetic is a fixed sequence that depends only on that
// row, so results never depend on the batch or the thread count.
#pragma once

#include "backend/backend.h"
#include "core/thread_pool.h"

namespace folio::cpu_pointwise {

void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, float eps, Tensor& out);
void rope(ThreadPool& pool, Tensor& x, const Tensor& positions, const RopeTable& table);
void glu(ThreadPool& pool, const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out);
void add(ThreadPool& pool, Tensor& x, const Tensor& y);
void scale(ThreadPool& pool, Tensor& x, float s);
void write_kv(ThreadPool& pool, const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv);

}  // namespace folio::cpu_pointwise
