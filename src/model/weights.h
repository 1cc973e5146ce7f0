// Weights: a model's tensors by their GGUF names, as Tensor views on the
// backend's device (zero-copy views of the mapped files on the CPU), whatever
// the format they were read from.
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
  Weights() = default;
  // An empty set that `add` fills; `source` names the model in errors and
  // `owner` keeps the storage of the added views alive.
  Weights(std::string source, std::shared_ptr<const void> owner);

  // Adds a view (throws Error when the name is taken); add_owned also keeps
  // the buffer that `tensor` points into.
  void add(const std::string& name, const Tensor& tensor);
  void add_owned(const std::string& name, const Tensor& tensor, Buffer storage);

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
  const std::string& source() const { return source_; }
  // Every tensor, by name (the order is unspecified).
  const std::unordered_map<std::string, Tensor>& tensors() const { return tensors_; }

 private:
  std::string source_;
  std::shared_ptr<const void> owner_;
  std::unordered_map<std::string, Tensor> tensors_;
  std::vector<Buffer> owned_;  // storage of converted tensors and of those the backend rewrote
};

}  // namespace folio
