#include "offline/quantizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/gguf_writer.h"
#include "offline/awq.h"
#include "tensor/code_layout.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

// The scales AWQ gives tensor `name` in the map `which` of o, or nullptr.
const std::vector<float>* find_scales(const AwqScales* awq, std::unordered_map<std::string, std::vector<float>> AwqScales::*which,
                                      const std::string& name) {
  if (awq == nullptr) return nullptr;
  auto it = (awq->*which).find(name);
  return it == (awq->*which).end() ? nullptr : &it->second;
}

// The covariance GPTQ quantizes t with under o, or nullptr where t takes
// the block-by-block encoder.
const InputCovariance* gptq_covariance(const QuantizeOptions& o, const GgufTensorInfo& t, const TensorQuantPlan& p) {
  if (o.method != QuantMethod::kGptq || o.importance == nullptr || t.num_dims != 2 || t.name == "token_embd.weight" ||
      code_layout(p.to) == nullptr)
    return nullptr;
  auto it = o.importance->covariances.find(t.name);
  if (it == o.importance->covariances.end()) return nullptr;
  if (it->second->cols != t.shape[0])
    fail("the input covariance of {} has {} columns; the tensor has {}", t.name, it->second->cols, t.shape[0]);
  return it->second.get();
}

}  // namespace

QuantizeSummary quantize_gguf(const GgufFile& in, const std::string& out_path, const QuantizeOptions& o,
                              const QuantizeProgress& progress) {
  const std::vector<TensorQuantPlan> plans = plan_quantization(in, o.recipe, o.overrides);
  GgufWriter writer;
  for (const auto& [key, value] : in.metadata()) writer.set(key, GgufMetaValue::from(value));
  writer.set("general.file_type", GgufMetaValue::u32(o.recipe.file_type));
  writer.set("general.quantization_version", GgufMetaValue::u32(2));
  const auto& tensors = in.tensors();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = tensors[i];
    writer.add_tensor(t.name, plans[i].to, std::span<const std::int64_t>(t.shape.data(), static_cast<std::size_t>(t.num_dims)));
  }
  writer.begin(out_path);

  ThreadPool pool(o.threads);
  QuantizeSummary summary;
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = tensors[i];
    const TensorQuantPlan& p = plans[i];
    summary.input_bytes += t.size_bytes;
    summary.parameters += t.num_elements;
    const std::vector<float>* column_scales = find_scales(o.awq, &AwqScales::columns, t.name);
    const std::vector<float>* row_scales = find_scales(o.awq, &AwqScales::rows, t.name);
    if (column_scales != nullptr || row_scales != nullptr) ++summary.awq_scaled;
    if (p.to == p.from && row_scales != nullptr) {
      // A norm AWQ folded 1/s into.
      FOLIO_CHECK(t.type == DType::F32 && t.num_dims == 1 && static_cast<std::int64_t>(row_scales->size()) == t.shape[0]);
      std::vector<float> v(row_scales->size());
      std::memcpy(v.data(), t.data, t.size_bytes);
      for (std::size_t c = 0; c < v.size(); ++c) v[c] *= (*row_scales)[c];
      writer.write_tensor_data(t.name, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(v.data()), t.size_bytes));
      summary.output_bytes += t.size_bytes;
      if (progress) progress(i, tensors.size(), p);
      continue;
    }
    if (p.to == p.from) {
      writer.write_tensor_data(t.name, std::span<const std::uint8_t>(t.data, t.size_bytes));
      summary.output_bytes += t.size_bytes;
      if (progress) progress(i, tensors.size(), p);
      continue;
    }
    const std::int64_t cols = t.shape[0];
    const std::int64_t rows = t.rows();
    const float* importance = nullptr;
    if (o.importance != nullptr) {
      if (auto it = o.importance->columns.find(t.name); it != o.importance->columns.end()) {
        if (static_cast<std::int64_t>(it->second.size()) != cols)
          fail("the importance of {} has {} columns; the tensor has {}", t.name, it->second.size(), cols);
        importance = it->second.data();
        ++summary.weighted;
      }
    }
    // Uniform importance: the least squared error.
    std::vector<float> uniform;
    if (importance == nullptr && !o.reference_scales) {
      uniform.assign(static_cast<std::size_t>(cols), 1.0f);
      importance = uniform.data();
    }
    // Columns AWQ multiplied by s meet inputs divided by s.
    std::vector<float> scaled_importance;
    if (column_scales != nullptr) {
      FOLIO_CHECK(static_cast<std::int64_t>(column_scales->size()) == cols);
      scaled_importance.resize(column_scales->size());
      for (std::size_t c = 0; c < scaled_importance.size(); ++c)
        scaled_importance[c] = (importance != nullptr ? importance[c] : 1.0f) / ((*column_scales)[c] * (*column_scales)[c]);
      importance = scaled_importance.data();
    }
    FOLIO_CHECK(row_scales == nullptr || static_cast<std::int64_t>(row_scales->size()) == rows);
    // Row r of the weight as it is encoded: dequantized, AWQ's scales applied.
    auto read_row = [&](std::int64_t r, float* row) {
      dequantize_row(p.from, t.data + static_cast<std::size_t>(r) * static_cast<std::size_t>(row_bytes(p.from, cols)), row, cols);
      if (column_scales != nullptr)
        for (std::int64_t c = 0; c < cols; ++c) row[c] *= (*column_scales)[static_cast<std::size_t>(c)];
      if (row_scales != nullptr)
        for (std::int64_t c = 0; c < cols; ++c) row[c] *= (*row_scales)[static_cast<std::size_t>(r)];
    };
    if (!is_float(p.from)) ++summary.requantized;
    const std::size_t out_row = static_cast<std::size_t>(row_bytes(p.to, cols));
    const InputCovariance* h = gptq_covariance(o, t, p);
    if (h != nullptr && h->rows < h->cols) {
      if (summary.gptq_short++ == 0) {
        summary.gptq_short_example = t.name;
        summary.gptq_short_rows = h->rows;
        summary.gptq_short_cols = h->cols;
      }
      h = nullptr;
    }
    if (h != nullptr) {
      // The whole tensor at once: GPTQ's error reaches every later column.
      std::vector<float> w(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
      pool.parallel_for(rows, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) read_row(r, w.data() + static_cast<std::size_t>(r * cols));
      }, 8);
      // Columns AWQ multiplied by s meet inputs divided by s.
      InputCovariance scaled;
      if (column_scales != nullptr) {
        scaled = *h;
        const auto& sc = *column_scales;
        for (std::size_t a = 0; a < sc.size(); ++a)
          for (std::size_t b = a; b < sc.size(); ++b) scaled.sum[a * sc.size() + b] /= sc[a] * sc[b];
        h = &scaled;
      }
      out.resize(static_cast<std::size_t>(rows) * out_row);
      gptq_quantize(p.to, w.data(), rows, cols, *h, out.data(), pool, o.gptq);
      writer.write_tensor_data(t.name, out);
      ++summary.gptq;
      summary.output_bytes += static_cast<std::uint64_t>(rows) * out_row;
      if (progress) progress(i, tensors.size(), p);
      continue;
    }
    // Rows in pieces of about 16 MiB of output, so memory stays bounded.
    const std::int64_t piece = std::max<std::int64_t>(1, static_cast<std::int64_t>((16u << 20) / std::max<std::size_t>(out_row, 1)));
    for (std::int64_t first = 0; first < rows; first += piece) {
      const std::int64_t count = std::min(piece, rows - first);
      out.resize(static_cast<std::size_t>(count) * out_row);
      pool.parallel_for(count, [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> row(static_cast<std::size_t>(cols));
        for (std::int64_t r = begin; r < end; ++r) {
          read_row(first + r, row.data());
          quantize_row_weighted(p.to, row.data(), importance, out.data() + static_cast<std::size_t>(r) * out_row, cols);
        }
      }, 8);
      writer.write_tensor_data(t.name, out);
    }
    summary.output_bytes += static_cast<std::uint64_t>(rows) * out_row;
    if (progress) progress(i, tensors.size(), p);
  }
  writer.finish();
  return summary;
}

}  // namespace folio
