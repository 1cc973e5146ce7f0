// Weights: a model's tensors by their GGUF names, as Tensor views on the
// backend's device (zero-copy views of the mapped file on the CPU).
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/buffer.h"
#include "model/gguf_file.h"
#include "tensor/tensor.h"

namespace folio {

class Weights {
 public:
  // Views every tensor of a GGUF file; the file stays mapped while any
  // Weights built from it lives.
  static Weights from_gguf(std::shared_ptr<const GgufFile> file);

  // Lets the backend rewrite each tensor into its own layout
  // (Backend::prepare_weight); once, before the model is built on them.
  void prepare(Backend& backend);

  const Tensor* find(std::string_view name) const;
  // The tensor `name` with exactly the given shape (outermost first); throws
  // an Error naming the tensor, the expected and the actual shape.
  const Tensor& get(std::string_view name, std::initializer_list<std::int64_t> shape) const;
  // As get, but returns nullptr when the tensor is absent.
  const Tensor* get_optional(std::string_view name, std::initializer_list<std::int64_t> shape) const;

  std::size_t num_tensors() const { return tensors_.size(); }
  // The names of all tensors, in no particular order.
  std::vector<std::string> names() const;
  std::uint64_t total_bytes() const;
  const GgufFile& file() const { return *file_; }

 private:
  std::shared_ptr<const GgufFile> file_;
  std::unordered_map<std::string, Tensor> tensors_;
  std::vector<Buffer> prepared_;  // storage of the tensors the backend rewrote
};

}  // namespace folio
