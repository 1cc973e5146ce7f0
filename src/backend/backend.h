// Backend: the operations a forward pass is written against, device-neutral.
// Every backend (the scalar reference, the threaded CPU one, CUDA) implements
// the same contract, and every op is tested against the reference by one
// conformance suite (tests/backend/ops). Tensors live on the backend's
// device: buffers are made and freed by the backend, weights and the KV pool
// are put there once, and nothing outside backend/ reads device memory; the
// host reaches it only through copy_to_device and copy_to_host. One engine
// step is a fixed sequence of these calls over preallocated buffers, with no
// host round trip inside it: ops may run asynchronously, and copy_to_host is
// the step's one synchronisation point. Problems an op can only see in device
// data (a token id outside the vocabulary, a bad block table or sampling
// record) are Errors all the same: a host backend throws them from the op, a
// device backend from the next copy_to_host or synchronize.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/buffer.h"
#include "backend/grouped_routing.h"
#include "backend/kv_pool.h"
#include "backend/recurrent_state.h"
#include "backend/sampling/sampling_batch.h"
#include "core/ids.h"
#include "tensor/tensor.h"

namespace folio {

// The activation of a gated FFN: out = act(gate) * up. kSwigluClamped is
// gpt-oss's: gate clamped to at most kSwigluClampedLimit, up to
// [-kSwigluClampedLimit, kSwigluClampedLimit], then
// out = (up + 1) * (gate * sigmoid(kSwigluClampedAlpha * gate)). kSigmoid is
// a gate, not an FFN's: out = sigmoid(gate) * up (Qwen3.5's attention output).
enum class GluActivation { kSilu, kGeluTanh, kSwigluClamped, kSigmoid };
inline constexpr float kSwigluClampedAlpha = 1.702f;
inline constexpr float kSwigluClampedLimit = 7.0f;

// Rotary embedding of one model: inverse frequency per rotated pair, with any
// scaling already folded in, and how pairs are formed.
struct RopeTable {
  bool neox = false;                // pairs (i, i + dim/2) instead of (2i, 2i+1)
  int dim = 0;                      // rotated dimensions per head
  float attention_factor = 1.0f;    // yarn's and longrope's magnitude scale on cos/sin
  Tensor inv_freq;                  // [dim / 2] f32 on the backend's device
  // Query temperature (Ministral 3, Llama 4), a table for queries only: the
  // whole head, rotated dimensions and the rest, is multiplied by
  // t = 1 + temperature_beta * ln(1 + floor((pos + temperature_offset) /
  // temperature_length)), computed in f32; beta 0: none.
  float temperature_beta = 0.0f;
  float temperature_offset = 0.0f;
  float temperature_length = 1.0f;
};

// The query temperature of `table` at position `pos` (1 without one): the
// one formula every backend's rope uses.
inline float rope_temperature(const RopeTable& table, float pos) {
  return 1.0f + table.temperature_beta *
                    std::log(1.0f + std::floor((pos + table.temperature_offset) / table.temperature_length));
}

// The paged KV cache of one layer: a K pool and a V pool of num_blocks blocks
// of block_size tokens, each in its own KvDType. A token's slot is
// block_id * block_size + offset.
struct PagedKv {
  KvPool k;
  KvPool v;
  std::int64_t block_size = kDefaultBlockSize;
  std::int64_t num_blocks() const { return k.codes.shape[0]; }
  std::int64_t num_kv_heads() const { return k.codes.shape[1]; }
  std::int64_t head_dim() const { return k.dim; }
  std::int64_t value_head_dim() const { return v.dim; }
  // Row of (slot, kv_head) in either pool.
  std::int64_t row_of(std::int64_t slot, std::int64_t kv_head) const {
    return ((slot / block_size) * num_kv_heads() + kv_head) * block_size + slot % block_size;
  }
};

// Where each token of a flattened ragged batch belongs; the tensors are int32
// on the device, the counts host numbers a kernel launch may size itself by.
// Sequences are contiguous in the batch: sequence s owns tokens
// [query_start[s], query_start[s + 1]) whose positions end at seq_lens[s] - 1.
// block_tables has a fixed row stride for a runner (max_blocks_per_seq, the
// model's context in blocks), so its shape does not change from step to step.
struct AttentionMetadata {
  std::int64_t num_tokens = 0;
  std::int64_t num_seqs = 0;
  std::int64_t max_blocks_per_seq = 0;  // row stride of block_tables
  std::int64_t max_seq_len = 0;         // longest seq_lens entry of the step
  std::int64_t max_query_len = 0;       // most tokens one sequence feeds this step
  Tensor positions;     // [num_tokens]
  Tensor slot_mapping;  // [num_tokens] cache slot each token's K/V is written to
  Tensor query_start;   // [num_seqs + 1]
  Tensor seq_lens;      // [num_seqs] tokens in context after this step
  Tensor block_tables;  // [num_seqs, max_blocks_per_seq]
};

struct AttentionParams {
  float scale = 1.0f;                // usually 1/sqrt(head_dim)
  std::int64_t sliding_window = 0;   // 0: attend to the whole context
  float softcap = 0.0f;              // 0: no logit soft-capping
  // Attention sinks (gpt-oss): [num_heads] f32 on the device, one learned
  // logit per query head that joins the softmax's denominator and weighs no
  // value row: p_j = e^(s_j - m) / (sum_i e^(s_i - m) + e^(sink - m)), with
  // m the maximum over the scores and the sink. No data: none.
  Tensor sinks;
};

// One weight of a group sharing its input (Backend::matmuls): y = x * w^T (+ bias).
struct MatmulTarget {
  const Tensor* w = nullptr;
  Tensor* y = nullptr;
  const Tensor* bias = nullptr;
};

// A place in a backend's queue of ops and copies (Backend::queue_point).
using QueuePoint = std::uint64_t;

// How a weight's bytes reach the device: progress(bytes done, bytes in all)
// for large models.
using LoadProgress = std::function<void(std::uint64_t done_bytes, std::uint64_t total_bytes)>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;

  // The number type of the activations its ops read and write: the residual
  // stream, normed inputs, projections, attention in and out, FFN and MoE
  // rows, router logits. F32 on the CPU backends; a GPU backend may choose
  // BF16 or F16 for its matrix units, and the reference runs all three (the
  // model code never names it). Whatever it is, logits and MoE routing
  // weights are F32 and ids I32; an op rounds to the activation type only
  // where it stores its outputs.
  virtual DType activation_dtype() const { return DType::F32; }
  // Everything of this backend that decides the bits of its results, in
  // words ("cpu avx512-vnni q8", "reference bf16", "cuda bf16 batch-invariant
  // NVIDIA H100"): two backends that say the same compute the same bits for
  // the same inputs. Thread counts are absent: results never depend on them
  // (docs/architecture.md rule 5). A server's system_fingerprint names it.
  virtual std::string numerics() const { return name() + " " + std::string(folio::name(activation_dtype())); }

  // Zero-filled memory on the backend's device, freed when the Buffer goes.
  virtual Buffer allocate(std::size_t bytes) = 0;
  // Host memory that copies to and from the device read fastest (pinned on
  // a GPU): the staging of what crosses each step. Host code may read and
  // write it.
  virtual Buffer allocate_host(std::size_t bytes) { return host_buffer(bytes); }
  // Copies bytes from host memory into dst. May return before the copy is
  // done when src lies in an allocate_host buffer; such a source must then
  // stay unchanged until the copy has run (wait_until its queue_point, or
  // the next copy_to_host or synchronize). Any other source is read before
  // the call returns.
  virtual void copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) = 0;
  // Copies bytes of src into host memory, after every op queued before it:
  // the one point where a step waits for the device.
  virtual void copy_to_host(void* dst, const Tensor& src, std::size_t bytes) = 0;
  // Waits until every queued op and copy is done.
  virtual void synchronize() {}
  // The place in the queue after every op and copy queued so far. Before the
  // host writes staging again that a queued copy_to_device may still read,
  // it waits until that copy's point (docs/architecture.md rule 8) - a wait for one
  // copy, not for the whole queue. A backend that runs each call before it
  // returns is always past every point.
  virtual QueuePoint queue_point() { return 0; }
  // Returns once everything queued before `point` has run.
  virtual void wait_until(QueuePoint point) {}

  // Puts one weight on the device at model load, before any op sees it. w
  // comes as a view of host memory (the mapped model file, or a converted
  // copy); afterwards it views the backend's copy, in whatever layout its
  // kernels read fastest, held by the returned Buffer, which the caller
  // keeps as long as w. A host backend may leave w viewing the host memory
  // it came in (an empty Buffer); the caller then keeps that memory alive.
  // Weights may be used by matmul and embedding alike.
  virtual Buffer load_weight(Tensor& w) = 0;

  // out[i, :] = table[ids[i], :] in the activation type. table: [vocab, dim]
  // of any weight type.
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor& out) = 0;

  // y[n, out] = x[n, in] * w[out, in]^T (+ bias[out]); w of any weight type,
  // x in the activation type, y in it or F32 (logits), bias F32. The result
  // of a row of x never depends on the other rows.
  virtual void matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) = 0;

  // matmul(*t.w, x, *t.y, t.bias) for every target (a layer's Q, K and V;
  // gate and up), the same bits as one call each; a backend may prepare x
  // once for all of them and run them in one pass over its threads.
  virtual void matmuls(const Tensor& x, std::span<const MatmulTarget> targets) {
    for (const MatmulTarget& t : targets) matmul(*t.w, x, *t.y, t.bias);
  }

  // y = (act(gate) * up) * w^T: glu then matmul, the same bits; gate is
  // scratch afterwards. A backend may form act(gate) * up row by row while
  // it prepares the matmul's input, instead of writing it out and reading it
  // back (the SwiGLU of a prefill is megabytes).
  virtual void glu_matmul(const Tensor& w, Tensor& gate, const Tensor& up, GluActivation act, Tensor& y) {
    glu(gate, up, act, gate);
    matmul(w, gate, y, nullptr);
  }

  // out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w[:]; out may be x.
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) = 0;

  // Rotates x: [num_tokens, num_heads, head_dim] in place by each token's position.
  virtual void rope(Tensor& x, const Tensor& positions, const RopeTable& table) = 0;

  // out = act(gate) * up, element-wise; all [n, d] activations.
  virtual void glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) = 0;

  // x += y, element-wise.
  virtual void add(Tensor& x, const Tensor& y) = 0;

  // x *= s.
  virtual void scale(Tensor& x, float s) = 0;

  // logits: [rows, vocab] f32 in place, x = x * scale, then, when softcap >
  // 0, x = softcap * tanh(x / softcap): the logit multipliers (Granite's 1 /
  // logits_scaling, Cohere's logit_scale) and the final soft-cap (Gemma 2).
  virtual void scale_logits(Tensor& logits, float scale, float softcap) = 0;

  // Writes k: [num_tokens, num_kv_heads, head_dim] and v likewise into the
  // cache slots of slot_mapping (negative slots are skipped), each row
  // encoded in its pool's type (codes and scales) from its own numbers only.
  virtual void write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) = 0;

  // Causal attention of q: [num_tokens, num_heads, head_dim] over each
  // sequence's cached K/V (already written for this step's tokens), with
  // grouped-query heads; out: [num_tokens, num_heads, value_head_dim]. Cache
  // rows are decoded as they are read (never the whole cache first).
  virtual void attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                         const AttentionParams& params, Tensor& out) = 0;

  // out[i, :] = x[rows[i], :].
  virtual void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) = 0;

  // Copies whole cache blocks, codes and scales of both pools (copy-on-write
  // of a shared partial block), in order: pairs[i] = {src_block, dst_block}.
  virtual void copy_blocks(PagedKv& kv, std::span<const std::pair<std::int32_t, std::int32_t>> pairs) = 0;

  // Mixture of experts. A step's tokens are routed (moe_route), their
  // (token, rank) assignments grouped by expert (moe_group), each expert's
  // projection run once over all of its rows (expert_matmul), and the
  // results summed back per token in rank order (moe_combine): each expert's
  // weights are read once per step, and a token's output depends on its own
  // row only. Every count stays on the device: expert_matmul reads the
  // group offsets itself, so no step waits on the host.

  // Per token, the k = ids.cols() experts of highest softmax probability over
  // router_logits: [T, num_experts] activations, best first (ties: the lower id);
  // ids: [T, k] i32, weights: [T, k] f32 their probabilities, divided by
  // their sum when normalize (Mixtral, Qwen3-MoE) or as they are (Qwen2-MoE).
  // Normalised, the weights are the softmax over the k chosen logits alone
  // (gpt-oss's router): the full denominator cancels.
  virtual void moe_route(const Tensor& router_logits, bool normalize, Tensor& ids, Tensor& weights) = 0;

  // moe_route under DeepSeek's rules (GroupedRouting): ids best first by
  // choice score (ties: the lower id), weights as GroupedRouting says;
  // selection_bias: [num_experts] f32 or null. Scores are computed in f32.
  virtual void moe_route_grouped(const Tensor& router_logits, const Tensor* selection_bias,
                                 const GroupedRouting& routing, Tensor& ids, Tensor& weights) = 0;

  // Groups the T * k assignments of ids: [T, k] i32 by expert, in (token,
  // rank) order within an expert. offsets: [num_experts + 1] i32, expert e's
  // rows are [offsets[e], offsets[e + 1]); row_tokens: [T * k] i32, the token
  // of each grouped row; assignment_rows: [T, k] i32, the grouped row of
  // assignment (t, r).
  virtual void moe_group(const Tensor& ids, Tensor& offsets, Tensor& row_tokens, Tensor& assignment_rows) = 0;

  // y[j, :] = x[j, :] * w[e, :, :]^T (+ bias[e, :]) for every row j in
  // expert e's range of offsets: [num_experts + 1] i32; w: [num_experts, out,
  // in] of any weight type, x: [rows, in] and y: [rows, out] activations,
  // rows == offsets[num_experts]; bias (gpt-oss's experts): [num_experts,
  // out] f32 or null. An expert without rows is not read. A row's result
  // never depends on the other rows.
  virtual void expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y,
                             const Tensor* bias) = 0;

  // out[t, :] = sum over r = 0 .. k - 1, in that order, of
  // weights[t, r] * y[assignment_rows[t, r], :]. y: [T * k, d] activations,
  // assignment_rows: [T, k] i32, weights: [T, k] f32, out: [T, d] activations.
  virtual void moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out) = 0;

  // out[t, :] = [a[t, :] | b[t, :]]: a: [T, da], b: [T, db], out: [T, da +
  // db], all activations (latent attention's key row: the rotary key beside
  // the normed latent).
  virtual void concat_cols(const Tensor& a, const Tensor& b, Tensor& out) = 0;

  // x[t, :] += sigmoid(gate[t]) * y[t, :]; x, y: [T, d], gate: [T, 1], all
  // activations (Qwen2-MoE's gated shared expert).
  virtual void add_sigmoid_gated(Tensor& x, const Tensor& y, const Tensor& gate) = 0;

  // Whether causal_conv1d and gated_delta_rule run here; a backend without
  // kernels for them says so, and a hybrid model is refused at load.
  virtual bool has_linear_attention() const { return true; }

  // Linear attention (gated DeltaNet). Each sequence s of meta runs its
  // tokens in order from its slot state_slots[s] ([num_seqs] i32; negative:
  // a padding sequence, whose outputs are zeros and which reads and writes no
  // slot) of `state`, or from zeros
  // when its first token this step is at position 0, and leaves the slot
  // holding its state after its last token: a sequence fed in chunks gets
  // the bits it gets in one step, and sequences never read each other's.

  // out[t, c] = silu(sum over j < kernel of w[c, j] * x[t - kernel + 1 + j, c]),
  // the inputs before a sequence's first token this step read from its
  // slot's window (state.conv), which ends holding its last kernel - 1
  // inputs. x, out: [T, channels] activations (not aliased); w: [channels,
  // kernel] f32.
  virtual void causal_conv1d(const Tensor& x, const Tensor& w, const AttentionMetadata& meta,
                             const Tensor& state_slots, RecurrentState& state, Tensor& out) = 0;

  // The gated delta rule, token by token (its recurrent form, for prefill
  // and decode alike). qkv: [T, 2 * key_heads * key_dim + value_heads *
  // value_dim] activations, the convolution's output (queries, keys, values);
  // a, b: [T, value_heads] activations. Per token and value head h, with
  // q and k of its key head L2-normalised (eps 1e-6) and q divided by
  // sqrt(key_dim): g = decay[h] * softplus(a + dt_bias[h]), beta = sigmoid(b),
  // S = S * e^g; S += k (beta (v - S^T k))^T; out = S^T q. S: the slot's
  // [key_dim, value_dim] state.state. out: [T, value_heads, value_dim].
  virtual void gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const DeltaRuleParams& params,
                                const AttentionMetadata& meta, const Tensor& state_slots, RecurrentState& state,
                                Tensor& out) = 0;

  // Sampling: each row of batch.rows turns one row of logits ([rows, vocab]
  // f32) into a token (SamplingRowParams says how: bias and penalties from
  // its adjustments, temperature, top-k, top-p, min-p, a draw from its RNG
  // state, or the verification of a proposal), writing batch.results and,
  // for the rows that ask, their logprobs. The reference is RowSampler
  // (backend/sampling/row_sampler.h), row by row; the CPU backends give its
  // bits. Rows are independent: a row's result never depends on the others.
  virtual void sample(const Tensor& logits, const SamplingBatch& batch) = 0;
};

// Expert e of a stacked expert weight w: [num_experts, out, in], as the
// [out, in] matrix it is (a view; packed layouts stay packed, being per row).
inline Tensor expert_weight(const Tensor& w, std::int64_t e) { return w.rows_view(e * w.shape[1], w.shape[1]); }

// Expert e's row of a stacked expert bias: [num_experts, out] f32 -> [out].
inline Tensor expert_bias(const Tensor& bias, std::int64_t e) {
  const std::int64_t out = bias.numel() / bias.shape[0];
  return bias.reshaped({bias.shape[0], out}).rows_view(e, 1).reshaped({out});
}

}  // namespace folio
