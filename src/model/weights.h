// Weights: a model's tensors by their GGUF names, whatever the format they
// were read from. They start as views of host memory (the mapped files, or
// copies converted at load); load() hands each to the backend, after which
// they view the backend's device (on the CPU, often still the mapping).
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
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

  // Adds a view of host memory (throws Error when the name is taken);
  // add_owned also keeps the host buffer that `tensor` points into, until
  // the backend has a copy of its own.
  void add(const std::string& name, const Tensor& tensor);
  void add_owned(const std::string& name, const Tensor& tensor, Buffer storage);

  // Replaces the fused tensor `name` by row views of it, part after part
  // ({"blk.0.attn_q.weight", 2048}, ...), before load: Phi-3's qkv and
  // gate_up, GLM-4's gate_up. Throws an Error naming the tensor when it is
  // missing or its rows are not the parts' sum.
  struct RowPart {
    std::string name;
    std::int64_t rows = 0;
  };
  void split_rows(const std::string& name, std::span<const RowPart> parts);
  // Drops the tensor `name` before load (one an architecture has replaced by
  // a converted copy); throws an Error naming it when it is missing.
  void erase(const std::string& name);

  // Puts every tensor on the backend's device, in its own layout
  // (Backend::load_weight), reporting bytes done; once, before the model is
  // built on them.
  void load(Backend& backend, const LoadProgress& progress = {});
  bool loaded() const { return loaded_; }

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
  std::unordered_map<std::string, Buffer> host_copies_;  // converted tensors' host storage, until loaded
  std::vector<Buffer> split_copies_;  // converted tensors split into parts: their storage, kept
  std::vector<Buffer> device_;                           // the backend's copies
  // Drops the file pages of a view the backend made a copy of (from_gguf), or null.
  std::function<void(const void*, std::size_t)> drop_pages_;
  bool loaded_ = false;
};

}  // namespace folio
