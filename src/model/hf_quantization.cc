#include "model/hf_quantization.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "tensor/fp8.h"
#include "tensor/half.h"

namespace folio {

const float kNf4Code[16] = {-1.0f,
                            -0.6961928009986877f,
                            -0.5250730514526367f,
                            -0.39491748809814453f,
                            -0.28444138169288635f,
                            -0.18477343022823334f,
                            -0.09105003625154495f,
                            0.0f,
                            0.07958029955625534f,
                            0.16093020141124725f,
                            0.24611230194568634f,
                            0.33791524171829224f,
                            0.44070982933044434f,
                            0.5626170039176941f,
                            0.7229568362236023f,
                            1.0f};

namespace {

using Json = nlohmann::json;

constexpr std::string_view kSupported =
    "fp8, fbgemm_fp8, compressed-tensors (float-quantized), bitsandbytes (4-bit) and mxfp4 (gpt-oss's experts)";
constexpr std::string_view kQuantStatePrefix = ".quant_state.bitsandbytes__";
constexpr std::int64_t kMaxBlock = std::int64_t{1} << 24;

// The bitsandbytes tensors that follow "<module>.weight".
constexpr std::string_view kBnbSuffixes[] = {".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
                                             ".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4"};
// The FP8 tensors that follow "<module>.": weight scales, and the activation
// scales of static schemes, which folio (computing activations in floats) has no use for.
constexpr std::string_view kFp8Suffixes[] = {".weight_scale_inv", ".weight_scale", ".input_scale", ".input_scale_ub",
                                             ".activation_scale"};

std::string shape_of(const SafetensorsTensor& t) {
  std::string s = "[";
  for (int d = 0; d < t.num_dims; ++d) s += fmt::format("{}{}", d ? ", " : "", t.shape[d]);
  return s + "]";
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A block size from a JSON pair [rows, cols] of positive counts.
void read_block(const Json& v, const std::string& where, std::int64_t& rows, std::int64_t& cols) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer())
    fail("{} is {}; expected a pair of counts such as [128, 128]", where, v.dump());
  rows = v[0].get<std::int64_t>();
  cols = v[1].get<std::int64_t>();
  if (rows <= 0 || cols <= 0 || rows > kMaxBlock || cols > kMaxBlock)
    fail("{} is {}; each count must be in 1..{}", where, v.dump(), kMaxBlock);
}

void read_compressed_tensors(const HfConfig& config, const Json& qc, HfQuantization& q) {
  const std::string source = config.source() + ": quantization_config";
  const std::string format = qc.value("format", std::string());
  if (format != "float-quantized")
    fail("{} of compressed-tensors has format \"{}\"; folio reads float-quantized (FP8 weights) only", source,
         format);
  auto groups = qc.find("config_groups");
  if (groups == qc.end() || !groups->is_object() || groups->empty())
    fail("{} of compressed-tensors has no config_groups", source);
  std::string strategy;
  for (const auto& [group, g] : groups->items()) {
    const Json* w = g.is_object() && g.contains("weights") ? &g["weights"] : nullptr;
    if (w == nullptr || !w->is_object())
      fail("{}.config_groups.{} has no weights scheme", source, group);
    if (w->value("num_bits", 0) != 8 || w->value("type", std::string()) != "float")
      fail("{}.config_groups.{}.weights is {}; folio reads 8-bit float (FP8) weights only", source, group,
           w->dump());
    const std::string s = w->value("strategy", std::string());
    if (!strategy.empty() && s != strategy)
      fail("{}: config groups mix weight strategies {} and {}; folio reads one", source, strategy, s);
    strategy = s;
    if (s == "block") {
      auto b = w->find("block_structure");
      if (b == w->end()) fail("{}.config_groups.{}.weights has strategy block but no block_structure", source, group);
      read_block(*b, fmt::format("{}.config_groups.{}.weights.block_structure", source, group), q.block_rows,
                 q.block_cols);
    }
  }
  if (strategy == "tensor")
    q.fp8_scales = Fp8Scales::kPerTensor;
  else if (strategy == "channel")
    q.fp8_scales = Fp8Scales::kPerChannel;
  else if (strategy == "block")
    q.fp8_scales = Fp8Scales::kBlock;
  else
    fail("{}: weight strategy \"{}\" is not read (tensor, channel and block are)", source, strategy);
  q.fp8_scale_suffix = "weight_scale";
}

// A float tensor of the checkpoint, as f32 numbers, checked to be of `count` elements.
std::vector<float> read_floats(const HfTensorSource& c, const SafetensorsTensor& t, std::int64_t count,
                               std::string_view role, const std::string& weight) {
  if (!is_float(t.dtype) || t.stored == SafetensorsDtype::F8_E4M3 || t.stored == SafetensorsDtype::U8)
    fail("{}: {} ({} of {}) has dtype {}; it must be F32, F16 or BF16", c.dir(), t.name, role, weight,
         name(t.stored));
  if (t.num_elements != count)
    fail("{}: {} ({} of {}) has shape {}, {} numbers; {} are needed", c.dir(), t.name, role, weight, shape_of(t),
         t.num_elements, count);
  std::vector<float> out(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (t.stored == SafetensorsDtype::F32) {
      std::memcpy(&out[k], t.data + 4 * k, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, t.data + 2 * k, 2);
      out[k] = t.stored == SafetensorsDtype::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return out;
}

const SafetensorsTensor& need_tensor(const HfTensorSource& c, const std::string& name, std::string_view role,
                                     const std::string& weight) {
  const SafetensorsTensor* t = c.find_tensor(name);
  if (t == nullptr)
    fail("{}: {} has no {} tensor {}; the checkpoint is incomplete or its quantization_config does not match it",
         c.dir(), weight, role, name);
  return *t;
}

std::string fp8_scale_name(const HfQuantization& q, const SafetensorsTensor& t) {
  return t.name.substr(0, t.name.size() - std::string_view("weight").size()) + q.fp8_scale_suffix;
}

// The expected scale grid of an FP8 weight [rows, cols]: scale_rows x scale_cols
// scales, each over block_rows x block_cols numbers (edge blocks partial).
struct ScaleGrid {
  std::int64_t block_rows, block_cols, scale_rows, scale_cols;
};
ScaleGrid scale_grid(const HfQuantization& q, std::int64_t rows, std::int64_t cols) {
  switch (q.fp8_scales) {
    case Fp8Scales::kPerTensor:
      return {rows, cols, 1, 1};
    case Fp8Scales::kPerChannel:
      return {1, cols, rows, 1};
    case Fp8Scales::kBlock:
      return {q.block_rows, q.block_cols, ceil_div(rows, q.block_rows), ceil_div(cols, q.block_cols)};
  }
  return {rows, cols, 1, 1};
}

void check_weight_2d(const HfTensorSource& c, const SafetensorsTensor& t) {
  if (t.num_dims != 2 || t.shape[0] <= 0 || t.shape[1] <= 0)
    fail("{}: quantized weight {} has shape {}; folio reads quantized [out, in] matrices only", c.dir(), t.name,
         shape_of(t));
}

const SafetensorsTensor& fp8_scale(const HfTensorSource& c, const HfQuantization& q, const SafetensorsTensor& t) {
  const SafetensorsTensor& s = need_tensor(c, fp8_scale_name(q, t), "scale", t.name);
  if (s.stored != SafetensorsDtype::F32 && s.stored != SafetensorsDtype::F16 && s.stored != SafetensorsDtype::BF16)
    fail("{}: {} (scale of {}) has dtype {}; it must be F32, F16 or BF16", c.dir(), s.name, t.name, name(s.stored));
  const ScaleGrid g = scale_grid(q, t.shape[0], t.shape[1]);
  bool ok = s.num_elements == g.scale_rows * g.scale_cols;
  if (q.fp8_scales == Fp8Scales::kPerChannel)  // [out, 1] or [out]
    ok = ok && ((s.num_dims == 2 && s.shape[1] == 1) || s.num_dims == 1);
  if (q.fp8_scales == Fp8Scales::kBlock) ok = ok && s.num_dims == 2 && s.shape[0] == g.scale_rows;
  if (!ok)
    fail("{}: scale {} has shape {}, but weight {} of shape {} with {} needs [{}, {}]; the checkpoint is damaged or "
         "its quantization_config does not match it",
         c.dir(), s.name, shape_of(s), t.name, shape_of(t), q.describe(), g.scale_rows, g.scale_cols);
  return s;
}

WidenedWeight widen_fp8(const HfTensorSource& c, const HfQuantization& q, const SafetensorsTensor& t) {
  check_weight_2d(c, t);
  const std::int64_t rows = t.shape[0], cols = t.shape[1];
  const SafetensorsTensor& s = fp8_scale(c, q, t);
  const ScaleGrid g = scale_grid(q, rows, cols);
  const std::vector<float> scales = read_floats(c, s, g.scale_rows * g.scale_cols, "scale", t.name);
  for (float v : scales)
    if (!std::isfinite(v)) fail("{}: scale {} holds a value that is not finite; the checkpoint is damaged", c.dir(), s.name);
  WidenedWeight w;
  w.storage = host_buffer(static_cast<std::size_t>(rows * cols) * sizeof(std::uint16_t));
  auto* out = static_cast<std::uint16_t*>(w.storage.data());
  const auto& table = fp8_e4m3_table();
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* scale_row = scales.data() + (r / g.block_rows) * g.scale_cols;
    const std::uint8_t* codes = t.data + r * cols;
    for (std::int64_t k = 0; k < cols; ++k)
      out[r * cols + k] = f32_to_bf16(table[codes[k]] * scale_row[k / g.block_cols]);
  }
  w.view = w.storage.view(DType::BF16, {rows, cols});
  return w;
}

// bitsandbytes' quant state: the JSON that the packed U8 tensor holds.
struct BnbState {
  std::string quant_type;  // nf4 or fp4
  std::int64_t blocksize = 0;
  DType dtype = DType::F32;
  std::int64_t rows = 0, cols = 0;
  bool nested = false;
  std::int64_t nested_blocksize = 0;
  float nested_offset = 0;
};

const SafetensorsTensor* bnb_state_tensor(const HfTensorSource& c, const std::string& weight) {
  for (std::string_view type : {"nf4", "fp4"})
    if (const auto* t = c.find_tensor(fmt::format("{}{}{}", weight, kQuantStatePrefix, type))) return t;
  return nullptr;
}

DType torch_dtype(const std::string& name, const std::string& where) {
  if (name == "float32") return DType::F32;
  if (name == "float16") return DType::F16;
  if (name == "bfloat16") return DType::BF16;
  fail("{}: dtype \"{}\" is not read (float32, float16 and bfloat16 are)", where, name);
}

std::int64_t json_count(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer() || it->get<std::int64_t>() <= 0 ||
      it->get<std::int64_t>() > kMaxBlock)
    fail("{}: {} is {}; expected a count in 1..{}", where, key, it == j.end() ? "absent" : it->dump(), kMaxBlock);
  return it->get<std::int64_t>();
}

BnbState read_bnb_state(const HfTensorSource& c, const SafetensorsTensor& weight) {
  const SafetensorsTensor* st = bnb_state_tensor(c, weight.name);
  if (st == nullptr)
    fail("{}: 4-bit weight {} has no quant state {}{}nf4; the checkpoint is incomplete", c.dir(), weight.name,
         weight.name, kQuantStatePrefix);
  const std::string where = fmt::format("{}: quant state {}", c.dir(), st->name);
  if (st->stored != SafetensorsDtype::U8 || st->num_dims != 1)
    fail("{} has dtype {} and shape {}; it must be the U8 bytes of a JSON object", where, name(st->stored),
         shape_of(*st));
  const auto* text = reinterpret_cast<const char*>(st->data);
  const Json j = Json::parse(text, text + st->size_bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail("{} is not a well-formed JSON object", where);
  BnbState s;
  s.quant_type = j.value("quant_type", std::string());
  if (s.quant_type != "nf4" && s.quant_type != "fp4")
    fail("{}: quant_type is {}; expected \"nf4\" or \"fp4\"", where, j.contains("quant_type") ? j["quant_type"].dump() : "absent");
  if (!st->name.ends_with(s.quant_type)) fail("{} says quant_type {}, not the type its name says", where, s.quant_type);
  s.blocksize = json_count(j, "blocksize", where);
  auto dtype = j.find("dtype");
  if (dtype == j.end() || !dtype->is_string()) fail("{}: dtype is absent or not a string", where);
  s.dtype = torch_dtype(dtype->get<std::string>(), where);
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array() || shape->size() != 2 || !(*shape)[0].is_number_integer() ||
      !(*shape)[1].is_number_integer() || (*shape)[0].get<std::int64_t>() <= 0 ||
      (*shape)[1].get<std::int64_t>() <= 0 || (*shape)[0].get<std::int64_t>() > (std::int64_t{1} << 31) ||
      (*shape)[1].get<std::int64_t>() > (std::int64_t{1} << 31))
    fail("{}: shape is {}; expected [out, in], two positive counts", where, shape == j.end() ? "absent" : shape->dump());
  s.rows = (*shape)[0].get<std::int64_t>();
  s.cols = (*shape)[1].get<std::int64_t>();
  s.nested = j.contains("nested_absmax") || j.contains("nested_blocksize") || j.contains("nested_offset");
  if (s.nested) {
    s.nested_blocksize = json_count(j, "nested_blocksize", where);
    auto offset = j.find("nested_offset");
    if (offset == j.end() || !offset->is_number() || !std::isfinite(offset->get<double>()))
      fail("{}: nested_offset is absent or not a finite number", where);
    s.nested_offset = static_cast<float>(offset->get<double>());
    if (j.contains("nested_dtype") && j["nested_dtype"] != "float32")
      fail("{}: nested_dtype is {}; bitsandbytes writes float32", where, j["nested_dtype"].dump());
  }
  return s;
}

// The per-block absmax of a 4-bit weight, widened (double quantization: each
// 8-bit code through the nested code and its block's nested absmax, plus the offset).
std::vector<float> bnb_absmax(const HfTensorSource& c, const SafetensorsTensor& weight, const BnbState& s) {
  const std::int64_t num_blocks = ceil_div(s.rows * s.cols, s.blocksize);
  const SafetensorsTensor& absmax = need_tensor(c, weight.name + ".absmax", "absmax", weight.name);
  if (!s.nested) return read_floats(c, absmax, num_blocks, "absmax", weight.name);
  if (absmax.stored != SafetensorsDtype::U8 || absmax.num_elements != num_blocks)
    fail("{}: {} (double-quantized absmax of {}) has dtype {} and shape {}; it must be U8 of {} codes", c.dir(),
         absmax.name, weight.name, name(absmax.stored), shape_of(absmax), num_blocks);
  const std::int64_t num_nested = ceil_div(num_blocks, s.nested_blocksize);
  const std::vector<float> nested_absmax =
      read_floats(c, need_tensor(c, weight.name + ".nested_absmax", "nested absmax", weight.name), num_nested,
                  "nested absmax", weight.name);
  const std::vector<float> nested_code = read_floats(
      c, need_tensor(c, weight.name + ".nested_quant_map", "nested quant map", weight.name), 256, "nested quant map",
      weight.name);
  std::vector<float> out(static_cast<std::size_t>(num_blocks));
  for (std::int64_t b = 0; b < num_blocks; ++b)
    out[static_cast<std::size_t>(b)] =
        nested_code[absmax.data[b]] * nested_absmax[static_cast<std::size_t>(b / s.nested_blocksize)] +
        s.nested_offset;
  return out;
}

WidenedWeight widen_bnb(const HfTensorSource& c, const SafetensorsTensor& t) {
  const BnbState s = read_bnb_state(c, t);
  const std::int64_t n = s.rows * s.cols;
  if (t.num_elements != ceil_div(n, 2))
    fail("{}: 4-bit weight {} holds {} bytes, but its quant state's shape [{}, {}] needs {} (two numbers a byte)",
         c.dir(), t.name, t.num_elements, s.rows, s.cols, ceil_div(n, 2));
  const std::vector<float> code =
      read_floats(c, need_tensor(c, t.name + ".quant_map", "quant map", t.name), 16, "quant map", t.name);
  if (s.quant_type == "nf4" && std::memcmp(code.data(), kNf4Code, sizeof(kNf4Code)) != 0)
    fail("{}: {}.quant_map is not the NF4 code of bitsandbytes; the checkpoint is damaged or not NF4", c.dir(),
         t.name);
  const std::vector<float> absmax = bnb_absmax(c, t, s);
  std::vector<float> row(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t byte = t.data[i / 2];
    const int nibble = i % 2 == 0 ? byte >> 4 : byte & 0x0f;  // the first number in the high half
    row[static_cast<std::size_t>(i)] = code[static_cast<std::size_t>(nibble)] * absmax[static_cast<std::size_t>(i / s.blocksize)];
  }
  WidenedWeight w;
  w.storage = host_buffer(static_cast<std::size_t>(n) * static_cast<std::size_t>(info(s.dtype).block_bytes));
  if (s.dtype == DType::F32) {
    std::memcpy(w.storage.data(), row.data(), row.size() * sizeof(float));
  } else {
    auto* out = static_cast<std::uint16_t*>(w.storage.data());
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = s.dtype == DType::F16 ? f32_to_f16(row[static_cast<std::size_t>(i)])
                                     : f32_to_bf16(row[static_cast<std::size_t>(i)]);
  }
  w.view = w.storage.view(s.dtype, {s.rows, s.cols});
  return w;
}

}  // namespace

HfQuantization HfQuantization::from_config(const HfConfig& config) {
  HfQuantization q;
  const Json* qc = config.find("quantization_config");
  if (qc == nullptr) return q;
  const std::string source = config.source() + ": quantization_config";
  if (!qc->is_object()) fail("{} is {}; expected an object", source, qc->dump());
  auto method = qc->find("quant_method");
  if (method == qc->end() || !method->is_string())
    fail("{} has no quant_method string; folio reads {}", source, kSupported);
  q.quant_method = method->get<std::string>();
  if (q.quant_method == "fp8") {
    q.method = HfQuantMethod::kFp8;
    q.fp8_scale_suffix = "weight_scale_inv";
    const std::string fmt_name = qc->value("fmt", std::string("e4m3"));
    if (fmt_name != "e4m3") fail("{}: fmt is \"{}\"; folio reads e4m3 FP8 weights only", source, fmt_name);
    auto block = qc->find("weight_block_size");
    if (block != qc->end() && !block->is_null()) {
      q.fp8_scales = Fp8Scales::kBlock;
      read_block(*block, source + ".weight_block_size", q.block_rows, q.block_cols);
    }
  } else if (q.quant_method == "fbgemm_fp8") {
    q.method = HfQuantMethod::kFp8;
    q.fp8_scales = Fp8Scales::kPerChannel;
    q.fp8_scale_suffix = "weight_scale";
  } else if (q.quant_method == "compressed-tensors") {
    q.method = HfQuantMethod::kFp8;
    read_compressed_tensors(config, *qc, q);
  } else if (q.quant_method == "bitsandbytes") {
    if (qc->value("load_in_8bit", false))
      fail("{}: load_in_8bit (LLM.int8) is not read; folio reads bitsandbytes' 4-bit (load_in_4bit) checkpoints",
           source);
    if (!qc->value("load_in_4bit", false)) fail("{} of bitsandbytes sets neither load_in_4bit nor load_in_8bit", source);
    q.method = HfQuantMethod::kBitsandbytes4bit;
  } else if (q.quant_method == "mxfp4") {
    q.method = HfQuantMethod::kMxfp4;
  } else {
    fail("{}: quant_method \"{}\" is not read; folio reads {}. Dequantize the model (or convert it to GGUF) first",
         source, q.quant_method, kSupported);
  }
  return q;
}

std::string HfQuantization::describe() const {
  switch (method) {
    case HfQuantMethod::kNone:
      return "no quantization";
    case HfQuantMethod::kBitsandbytes4bit:
      return "bitsandbytes 4-bit";
    case HfQuantMethod::kMxfp4:
      return "mxfp4";
    case HfQuantMethod::kFp8:
      break;
  }
  switch (fp8_scales) {
    case Fp8Scales::kPerTensor:
      return "fp8 per tensor";
    case Fp8Scales::kPerChannel:
      return "fp8 per channel";
    case Fp8Scales::kBlock:
      return fmt::format("fp8 {}x{} blocks", block_rows, block_cols);
  }
  return "fp8";
}

bool is_quantization_tensor(const HfQuantization& q, std::string_view hf_name) {
  if (q.method == HfQuantMethod::kMxfp4) return hf_name.ends_with("_scales");  // read with its _blocks
  if (q.method == HfQuantMethod::kFp8) {
    for (std::string_view s : kFp8Suffixes)
      if (hf_name.ends_with(s)) return true;
  } else if (q.method == HfQuantMethod::kBitsandbytes4bit) {
    for (std::string_view s : kBnbSuffixes)
      if (hf_name.size() > s.size() && hf_name.ends_with(s) &&
          hf_name.substr(0, hf_name.size() - s.size()).ends_with(".weight"))
        return true;
  }
  return false;
}

bool is_quantized_weight(const HfQuantization& q, const SafetensorsTensor& t) {
  if (t.stored == SafetensorsDtype::F8_E4M3) return true;  // widen_weight refuses it without an fp8 config
  return q.method == HfQuantMethod::kBitsandbytes4bit && t.stored == SafetensorsDtype::U8 &&
         t.name.ends_with(".weight");
}

namespace {

// An F8_E4M3 tensor needs an FP8 config, and must be a weight.
void check_fp8_config(const HfTensorSource& c, const SafetensorsTensor& t) {
  const HfQuantization& q = c.quantization();
  if (q.method != HfQuantMethod::kFp8)
    fail("{}: tensor {} is F8_E4M3 but config.json has no FP8 quantization_config ({}); without one its scales "
         "are unknown",
         c.dir(), t.name, q.describe());
  if (!t.name.ends_with(".weight")) fail("{}: F8_E4M3 tensor {} is not a weight", c.dir(), t.name);
}

}  // namespace

WidenedWeight widen_weight(const HfTensorSource& c, const SafetensorsTensor& t) {
  const HfQuantization& q = c.quantization();
  if (t.stored == SafetensorsDtype::F8_E4M3) {
    check_fp8_config(c, t);
    return widen_fp8(c, q, t);
  }
  if (q.method == HfQuantMethod::kBitsandbytes4bit && t.stored == SafetensorsDtype::U8) return widen_bnb(c, t);
  fail("{}: tensor {} has dtype {}, which only a matching quantization_config explains", c.dir(), t.name,
       name(t.stored));
}

QuantizedWeightSize quantized_weight_size(const HfTensorSource& c, const SafetensorsTensor& t) {
  const HfQuantization& q = c.quantization();
  QuantizedWeightSize out;
  out.bytes = t.size_bytes;
  if (t.stored == SafetensorsDtype::F8_E4M3) {
    check_fp8_config(c, t);
    out.format = q.describe();
    out.num_elements = t.num_elements;
    if (const auto* s = c.find_tensor(fp8_scale_name(q, t))) out.bytes += s->size_bytes;
    return out;
  }
  const BnbState s = read_bnb_state(c, t);
  out.format = s.quant_type + (s.nested ? " double quant" : "");
  out.num_elements = s.rows * s.cols;
  for (std::string_view suffix : kBnbSuffixes)
    if (const auto* aux = c.find_tensor(t.name + std::string(suffix))) out.bytes += aux->size_bytes;
  return out;
}

}  // namespace folio
