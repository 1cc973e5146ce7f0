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
// out[0, n) = act(gate) * up: glu's arithmetic for each element, so a row
// formed here equals that row of glu's output bit for bit.
void glu_row(const float* gate, const float* up, GluActivation act, std::int64_t n, float* out);
void add(ThreadPool& pool, Tensor& x, const Tensor& y);
void scale(ThreadPool& pool, Tensor& x, float s);
// logits: [rows, vocab] f32, x = x * scale, then softcap * tanh(x / softcap) when softcap > 0.
void scale_logits(ThreadPool& pool, Tensor& logits, float scale, float softcap);
void write_kv(ThreadPool& pool, const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv);

}  // namespace folio::cpu_pointwise
