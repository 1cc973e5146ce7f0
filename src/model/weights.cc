#include "model/weights.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace folio {

Weights Weights::from_gguf(std::shared_ptr<const GgufFile> file) {
  Weights w;
  for (const auto& info : file->tensors()) {
    Tensor t;
    t.data = const_cast<std::uint8_t*>(info.data);  // read-only mapping: ops never write weights
    t.dtype = info.type;
    t.device = Device::kCpu;
    t.ndim = info.num_dims;
    for (int d = 0; d < info.num_dims; ++d) t.shape[d] = info.shape[info.num_dims - 1 - d];
    w.tensors_.emplace(info.name, t);
  }
  w.source_ = file->path();
  const GgufFile* mapped = file.get();
  w.drop_pages_ = [mapped](const void* p, std::size_t n) { mapped->drop_pages(p, n); };
  w.owner_ = std::move(file);
  return w;
}

Weights::Weights(std::string source, std::shared_ptr<const void> owner)
    : source_(std::move(source)), owner_(std::move(owner)) {}

void Weights::add(const std::string& name, const Tensor& tensor) {
  if (!tensors_.emplace(name, tensor).second) fail("{}: tensor {} appears twice", source_, name);
}

void Weights::add_owned(const std::string& name, const Tensor& tensor, Buffer storage) {
  FOLIO_CHECK(storage.device() == Device::kCpu);
  add(name, tensor);
  host_copies_.emplace(name, std::move(storage));
}

void Weights::split_rows(const std::string& name, std::span<const RowPart> parts) {
  FOLIO_CHECK(!loaded_);
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail("{}: tensor {} is missing", source_, name);
  const Tensor whole = it->second;
  std::int64_t rows = 0;
  for (const RowPart& p : parts) rows += p.rows;
  // A matrix splits by rows; a bias ([n], of a plain number type) by elements.
  if (whole.ndim > 2 || whole.shape[0] != rows || (whole.ndim == 1 && info(whole.dtype).block_elems != 1))
    fail("{}: tensor {} has shape {} ({}); its parts need {} rows", source_, name, whole.shape_string(),
         folio::name(whole.dtype), rows);
  if (auto copy = host_copies_.extract(name)) split_copies_.push_back(std::move(copy.mapped()));
  tensors_.erase(it);
  std::int64_t first = 0;
  for (const RowPart& p : parts) {
    Tensor part = whole;
    if (whole.ndim == 1) {
      part.data = static_cast<char*>(whole.data) + static_cast<std::size_t>(first * info(whole.dtype).block_bytes);
      part.shape[0] = p.rows;
    } else {
      part = whole.rows_view(first, p.rows);
    }
    add(p.name, part);
    first += p.rows;
  }
}

void Weights::erase(const std::string& name) {
  FOLIO_CHECK(!loaded_);
  if (tensors_.erase(name) == 0) fail("{}: tensor {} is missing", source_, name);
  host_copies_.erase(name);
}

void Weights::load(Backend& backend, const LoadProgress& progress) {
  FOLIO_CHECK(!loaded_);
  const std::uint64_t total = total_bytes();
  std::uint64_t done = 0;
  // In name order, so that a file's tensors go in the same order every time.
  std::vector<std::string> order = names();
  std::sort(order.begin(), order.end());
  for (const std::string& name : order) {
    Tensor& t = tensors_.at(name);
    done += t.bytes();
    const void* view = t.data;
    const std::size_t view_bytes = t.bytes();
    Buffer copy = backend.load_weight(t);
    if (!copy.empty()) {
      device_.push_back(std::move(copy));
      // The device has its own now: the host's goes (a mapped file's pages
      // stay readable, so a tensor sharing them loses nothing).
      if (host_copies_.erase(name) == 0 && drop_pages_) drop_pages_(view, view_bytes);
    }
    if (progress) progress(done, total);
  }
  loaded_ = true;
}

const Tensor* Weights::find(std::string_view name) const {
  auto it = tensors_.find(std::string(name));
  return it == tensors_.end() ? nullptr : &it->second;
}

const Tensor* Weights::get_optional(std::string_view name, std::initializer_list<std::int64_t> shape) const {
  const Tensor* t = find(name);
  if (t == nullptr) return nullptr;
  Tensor expected(nullptr, t->dtype, shape);
  bool same = expected.ndim == t->ndim;
  for (int d = 0; same && d < t->ndim; ++d) same = expected.shape[d] == t->shape[d];
  if (!same)
    fail("{}: tensor {} has shape {}, expected {}", source_, name, t->shape_string(), expected.shape_string());
  if (!info(t->dtype).dequantizable)
    fail("{}: tensor {} has type {}, which folio cannot compute with yet", source_, name, folio::name(t->dtype));
  return t;
}

const Tensor& Weights::get(std::string_view name, std::initializer_list<std::int64_t> shape) const {
  const Tensor* t = get_optional(name, shape);
  if (t == nullptr) fail("{}: tensor {} is missing", source_, name);
  return *t;
}

std::uint64_t Weights::total_bytes() const {
  std::uint64_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.bytes();
  return n;
}

std::vector<std::string> Weights::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, tensor] : tensors_) out.push_back(name);
  return out;
}

}  // namespace folio
