#include "model/arch/gpt_oss_experts.h"

#include <fmt/format.h>

#include <cstring>
#include <string>

#include "backend/buffer.h"
#include "core/error.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

constexpr std::int64_t kBlock = 32;       // numbers per MXFP4 block
constexpr std::int64_t kBlockBytes = 16;  // their codes in a checkpoint

std::string shape_of(const SafetensorsTensor& t) {
  std::string s = "[";
  for (int d = 0; d < t.num_dims; ++d) s += fmt::format("{}{}", d ? ", " : "", t.shape[d]);
  return s + "]";
}

void need(bool ok, const HfCheckpoint& c, const SafetensorsTensor& t, std::string_view what) {
  if (!ok) fail("{}: gpt-oss tensor {} is {} {}; {}", c.dir(), t.name, name(t.stored), shape_of(t), what);
}

bool is_float(const SafetensorsTensor& t) {
  return t.stored == SafetensorsDtype::F32 || t.stored == SafetensorsDtype::F16 || t.stored == SafetensorsDtype::BF16;
}

// A host tensor of `dtype` and `shape`, to fill and then add under `name`.
struct HostTensor {
  Buffer storage;
  Tensor view;
  HostTensor(DType dtype, std::initializer_list<std::int64_t> shape) {
    view = Tensor(nullptr, dtype, shape);
    storage = host_buffer(view.bytes());
    view.data = storage.data();
  }
  std::uint8_t* bytes() const { return static_cast<std::uint8_t*>(view.data); }
  void add_to(Weights& w, const std::string& name) { w.add_owned(name, view, std::move(storage)); }
};

// [E, in, 2F] (gate and up interleaved along the last axis) -> gate and up
// [E, F, in], elements of `es` bytes moved as they are.
void split_gate_up(Weights& w, const SafetensorsTensor& t, const std::string& gate, const std::string& up) {
  const std::int64_t E = t.shape[0], in = t.shape[1], F = t.shape[2] / 2;
  const auto es = static_cast<std::size_t>(element_bytes(t.stored));
  HostTensor g(t.dtype, {E, F, in}), u(t.dtype, {E, F, in});
  for (std::int64_t e = 0; e < E; ++e)
    for (std::int64_t i = 0; i < in; ++i) {
      const std::uint8_t* src = t.data + static_cast<std::size_t>((e * in + i) * 2 * F) * es;
      for (std::int64_t f = 0; f < F; ++f) {
        const std::size_t dst = static_cast<std::size_t>((e * F + f) * in + i) * es;
        std::memcpy(g.bytes() + dst, src + static_cast<std::size_t>(2 * f) * es, es);
        std::memcpy(u.bytes() + dst, src + static_cast<std::size_t>(2 * f + 1) * es, es);
      }
    }
  g.add_to(w, gate);
  u.add_to(w, up);
}

// [E, in, out] -> [E, out, in].
void transpose_experts(Weights& w, const SafetensorsTensor& t, const std::string& name) {
  const std::int64_t E = t.shape[0], in = t.shape[1], out = t.shape[2];
  const auto es = static_cast<std::size_t>(element_bytes(t.stored));
  HostTensor d(t.dtype, {E, out, in});
  for (std::int64_t e = 0; e < E; ++e)
    for (std::int64_t i = 0; i < in; ++i)
      for (std::int64_t o = 0; o < out; ++o)
        std::memcpy(d.bytes() + static_cast<std::size_t>((e * out + o) * in + i) * es,
                    t.data + static_cast<std::size_t>((e * in + i) * out + o) * es, es);
  d.add_to(w, name);
}

// A bias [E, n * stride] -> [E, n] f32 of the columns first, first + stride, ...
void add_bias(Weights& w, const SafetensorsTensor& t, std::int64_t stride, std::int64_t first, const std::string& name) {
  const std::int64_t E = t.shape[0], n = t.shape[1] / stride;
  const auto es = static_cast<std::size_t>(element_bytes(t.stored));
  HostTensor b(DType::F32, {E, n});
  auto* out = static_cast<float*>(b.view.data);
  for (std::int64_t e = 0; e < E; ++e)
    for (std::int64_t j = 0; j < n; ++j)
      dequantize_row(t.dtype, t.data + static_cast<std::size_t>(e * t.shape[1] + j * stride + first) * es,
                     out + e * n + j, 1);
  b.add_to(w, name);
}

// blocks [E, rows, in / 32, 16] and scales [E, rows, in / 32] -> MXFP4 [E,
// rows / stride, in] of the rows first, first + stride, ...
void add_mxfp4(Weights& w, const SafetensorsTensor& blocks, const SafetensorsTensor& scales, std::int64_t stride,
               std::int64_t first, const std::string& name) {
  const std::int64_t E = blocks.shape[0], rows = blocks.shape[1] / stride, nb = blocks.shape[2];
  HostTensor m(DType::MXFP4, {E, rows, nb * kBlock});
  const std::size_t row_bytes = m.view.row_bytes();
  for (std::int64_t e = 0; e < E; ++e)
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t src_row = e * blocks.shape[1] + r * stride + first;
      repack_mxfp4_row(blocks.data + src_row * nb * kBlockBytes, scales.data + src_row * nb, nb,
                       m.bytes() + static_cast<std::size_t>(e * rows + r) * row_bytes);
    }
  m.add_to(w, name);
}

}  // namespace

void repack_mxfp4_row(const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t num_blocks,
                      std::uint8_t* out) {
  static_assert(sizeof(BlockMXFP4) == 1 + kBlockBytes);
  for (std::int64_t b = 0; b < num_blocks; ++b, out += sizeof(BlockMXFP4)) {
    const std::uint8_t* codes = blocks + b * kBlockBytes;
    auto code = [codes](int i) { return static_cast<std::uint8_t>((codes[i / 2] >> (4 * (i % 2))) & 0x0F); };
    out[0] = scales[b];
    for (int j = 0; j < 16; ++j) out[1 + j] = static_cast<std::uint8_t>(code(j) | (code(j + 16) << 4));
  }
}

bool add_gpt_oss_expert_tensor(Weights& w, const HfCheckpoint& c, const SafetensorsTensor& t) {
  unsigned layer = 0;
  std::string_view rest;
  if (!split_hf_layer_name(t.name, layer, rest) || !rest.starts_with("mlp.experts.")) return false;
  rest.remove_prefix(std::string_view("mlp.experts.").size());
  auto gguf = [layer](const char* tensor) { return fmt::format("blk.{}.{}", layer, tensor); };
  const bool quantized = c.quantization().method == HfQuantMethod::kMxfp4;

  if (rest == "gate_up_proj" || rest == "down_proj") {
    need(is_float(t) && t.num_dims == 3 && (rest == "down_proj" || t.shape[2] % 2 == 0), c, t,
         "expected a float [experts, in, out] tensor (gate_up_proj: gate and up interleaved, an even out)");
    if (rest == "gate_up_proj")
      split_gate_up(w, t, gguf("ffn_gate_exps.weight"), gguf("ffn_up_exps.weight"));
    else
      transpose_experts(w, t, gguf("ffn_down_exps.weight"));
    return true;
  }
  if (rest == "gate_up_proj_bias" || rest == "down_proj_bias") {
    need(is_float(t) && t.num_dims == 2 && (rest == "down_proj_bias" || t.shape[1] % 2 == 0), c, t,
         "expected a float [experts, out] bias (gate_up_proj_bias: an even out)");
    if (rest == "gate_up_proj_bias") {
      add_bias(w, t, 2, 0, gguf("ffn_gate_exps.bias"));
      add_bias(w, t, 2, 1, gguf("ffn_up_exps.bias"));
    } else {
      add_bias(w, t, 1, 0, gguf("ffn_down_exps.bias"));
    }
    return true;
  }
  if (rest == "gate_up_proj_scales" || rest == "down_proj_scales") {
    need(quantized, c, t, "MXFP4 scales need config.json's quantization_config with quant_method mxfp4");
    return true;  // read with its blocks
  }
  if (rest != "gate_up_proj_blocks" && rest != "down_proj_blocks") return false;
  need(quantized, c, t, "MXFP4 blocks need config.json's quantization_config with quant_method mxfp4");
  const bool gate_up = rest == "gate_up_proj_blocks";
  need(t.stored == SafetensorsDtype::U8 && t.num_dims == 4 && t.shape[3] == kBlockBytes &&
           (!gate_up || t.shape[1] % 2 == 0),
       c, t, "expected U8 [experts, out, in / 32, 16] (gate_up: an even out)");
  const std::string scales_name = t.name.substr(0, t.name.size() - std::string_view("blocks").size()) + "scales";
  const SafetensorsTensor* s = c.find_tensor(scales_name);
  if (s == nullptr) fail("{}: MXFP4 tensor {} has no {} beside it", c.dir(), t.name, scales_name);
  need(s->stored == SafetensorsDtype::U8 && s->num_dims == 3 && s->shape[0] == t.shape[0] &&
           s->shape[1] == t.shape[1] && s->shape[2] == t.shape[2],
       c, *s, fmt::format("expected U8 [experts, out, in / 32] matching {} {}", t.name, shape_of(t)));
  if (gate_up) {
    add_mxfp4(w, t, *s, 2, 0, gguf("ffn_gate_exps.weight"));
    add_mxfp4(w, t, *s, 2, 1, gguf("ffn_up_exps.weight"));
  } else {
    add_mxfp4(w, t, *s, 1, 0, gguf("ffn_down_exps.weight"));
  }
  return true;
}

}  // namespace folio
