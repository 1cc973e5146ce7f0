#include "server/model_pool.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/api/api_error.h"

namespace folio::server {

const char* model_state_name(ModelState state) {
  switch (state) {
    case ModelState::kUnloaded:
      return "unloaded";
    case ModelState::kLoading:
      return "loading";
    case ModelState::kLoaded:
      return "loaded";
    case ModelState::kFailed:
      return "failed";
  }
  return "unknown";
}

namespace {

std::string gib(std::int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

}  // namespace

ModelPool::ModelPool(ModelPoolLimits limits) : limits_(limits) {}

void ModelPool::add(ModelSpec spec) {
  std::lock_guard lock(mutex_);
  if (find(spec.name) != nullptr) fail("two models are named \"{}\"; give each its own name (NAME=MODEL)", spec.name);
  Entry e;
  e.spec = std::move(spec);
  entries_.push_back(std::move(e));
}

void ModelPool::add_loaded(ModelSpec spec, LoadedModel loaded) {
  std::lock_guard lock(mutex_);
  if (find(spec.name) != nullptr) fail("two models are named \"{}\"; give each its own name (NAME=MODEL)", spec.name);
  Entry e;
  e.spec = std::move(spec);
  e.state = ModelState::kLoaded;
  e.model = std::move(loaded.model);
  e.num_bytes = loaded.num_bytes;
  e.last_used = Clock::now();
  entries_.push_back(std::move(e));
}

ModelPool::Entry* ModelPool::find(const std::string& name) {
  for (Entry& e : entries_)
    if (e.spec.name == name) return &e;
  return nullptr;
}

const ModelPool::Entry* ModelPool::find(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.spec.name == name) return &e;
  return nullptr;
}

std::int64_t ModelPool::loaded_bytes() const {
  std::int64_t total = 0;
  for (const Entry& e : entries_)
    if (e.state == ModelState::kLoaded || e.state == ModelState::kLoading)
      total += e.state == ModelState::kLoaded ? e.num_bytes : e.spec.estimated_bytes;
  return total;
}

int ModelPool::num_loaded() const {
  return static_cast<int>(std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) {
    return e.state == ModelState::kLoaded || e.state == ModelState::kLoading;
  }));
}

bool ModelPool::make_room(const Entry& incoming, std::int64_t num_bytes,
                          std::vector<std::shared_ptr<const ServedModel>>& dropped) {
  const auto over = [&] {
    const bool counted = incoming.state == ModelState::kLoaded || incoming.state == ModelState::kLoading;
    const int count = num_loaded() + (counted ? 0 : 1);
    const std::int64_t bytes = loaded_bytes() + (counted ? 0 : num_bytes);
    return (limits_.max_loaded > 0 && count > limits_.max_loaded) ||
           (limits_.max_bytes > 0 && bytes > limits_.max_bytes);
  };
  while (over()) {
    Entry* victim = nullptr;
    for (Entry& e : entries_)
      if (&e != &incoming && e.state == ModelState::kLoaded && !busy(e) && e.spec.load &&
          (victim == nullptr || e.last_used < victim->last_used))
        victim = &e;
    if (victim == nullptr) return false;
    dropped.push_back(std::move(victim->model));
    victim->state = ModelState::kUnloaded;
  }
  return true;
}

std::shared_ptr<const ServedModel> ModelPool::acquire(const std::string& wanted) {
  std::vector<std::shared_ptr<const ServedModel>> dropped;  // unloaded here, with the lock released
  std::unique_lock lock(mutex_);
  if (entries_.empty()) throw ApiError(503, "the server serves no model yet");
  const std::string name = wanted.empty() ? entries_.front().spec.name : wanted;
  const auto deadline = Clock::now() + limits_.load_wait;
  for (;;) {
    Entry* e = find(name);
    if (e == nullptr) {
      std::string served;
      for (const Entry& x : entries_) served += (served.empty() ? "`" : ", `") + x.spec.name + "`";
      throw ApiError(404, fmt::format("The model `{}` does not exist; this server serves {}", name, served), "model",
                     "model_not_found");
    }
    switch (e->state) {
      case ModelState::kLoaded:
        e->last_used = Clock::now();
        return e->model;
      case ModelState::kLoading:
        if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && find(name)->state == ModelState::kLoading)
          throw ApiError(503, fmt::format("the model `{}` is still loading; try again shortly", name));
        continue;
      case ModelState::kFailed:
      case ModelState::kUnloaded:
        break;
    }
    // Load it here, on this request's thread; others asking wait above.
    if (limits_.max_bytes > 0 && e->spec.estimated_bytes > limits_.max_bytes)
      throw ApiError(503, fmt::format("the model `{}` needs about {}, more than the whole budget of {} "
                                      "(--models-memory)",
                                      name, gib(e->spec.estimated_bytes), gib(limits_.max_bytes)));
    if (!make_room(*e, e->spec.estimated_bytes, dropped))
      throw ApiError(
          503, fmt::format("no room to load `{}` (about {}): the models that would have to be unloaded are "
                           "serving requests (--max-loaded-models {}{}); try again when they finish",
                           name, gib(e->spec.estimated_bytes), limits_.max_loaded,
                           limits_.max_bytes > 0 ? fmt::format(", --models-memory {}", gib(limits_.max_bytes)) : ""));
    e->state = ModelState::kLoading;
    e->error.clear();
    const std::function<LoadedModel()> load = e->spec.load;
    lock.unlock();
    dropped.clear();  // what made room is gone before the new one loads
    LoadedModel loaded;
    std::string error;
    try {
      loaded = load();
    } catch (const std::exception& ex) {
      error = ex.what();
    }
    lock.lock();
    e = find(name);  // entries_ only grows at start-up, but look again for clarity
    if (!error.empty() || !loaded.model) {
      e->state = ModelState::kFailed;
      e->error = error.empty() ? "the loader gave no model" : error;
      changed_.notify_all();
      throw ApiError(500, fmt::format("the model `{}` failed to load: {}", name, e->error));
    }
    e->state = ModelState::kLoaded;
    e->model = std::move(loaded.model);
    e->num_bytes = loaded.num_bytes;
    e->last_used = Clock::now();
    make_room(*e, 0, dropped);  // the measured size may be larger than the estimate
    changed_.notify_all();
    return e->model;
  }
}

std::shared_ptr<const ServedModel> ModelPool::peek(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const Entry* e = name.empty() ? (entries_.empty() ? nullptr : &entries_.front()) : find(name);
  return e != nullptr && e->state == ModelState::kLoaded ? e->model : nullptr;
}

bool ModelPool::unload(const std::string& name) {
  std::shared_ptr<const ServedModel> dropped;  // the engine stops after the lock is released
  std::lock_guard lock(mutex_);
  Entry* e = find(name);
  if (e == nullptr || e->state != ModelState::kLoaded || busy(*e) || !e->spec.load) return false;
  dropped = std::move(e->model);
  e->state = ModelState::kUnloaded;
  return true;
}

void ModelPool::sweep_idle() {
  if (limits_.keep_alive.count() <= 0) return;
  std::vector<std::shared_ptr<const ServedModel>> dropped;
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  for (Entry& e : entries_) {
    if (e.state != ModelState::kLoaded || !e.spec.load) continue;
    if (busy(e)) {
      e.last_used = now;  // idle counts from the end of its last request
      continue;
    }
    if (now - e.last_used < limits_.keep_alive) continue;
    dropped.push_back(std::move(e.model));
    e.state = ModelState::kUnloaded;
  }
}

std::vector<ModelStatus> ModelPool::status() const {
  std::lock_guard lock(mutex_);
  std::vector<ModelStatus> out;
  const auto now = Clock::now();
  for (const Entry& e : entries_) {
    ModelStatus s;
    s.name = e.spec.name;
    s.source = e.spec.source;
    s.state = e.state;
    s.num_bytes = e.state == ModelState::kLoaded ? e.num_bytes : e.spec.estimated_bytes;
    s.num_holders = e.model ? static_cast<int>(e.model.use_count()) - 1 : 0;
    s.idle_s = e.state == ModelState::kLoaded ? std::chrono::duration<double>(now - e.last_used).count() : 0;
    s.error = e.error;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> ModelPool::names() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.spec.name);
  return out;
}

std::string ModelPool::first_name() const {
  std::lock_guard lock(mutex_);
  return entries_.empty() ? std::string() : entries_.front().spec.name;
}

bool ModelPool::has(const std::string& name) const {
  std::lock_guard lock(mutex_);
  return find(name) != nullptr;
}

std::vector<std::shared_ptr<const ServedModel>> ModelPool::loaded() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<const ServedModel>> out;
  for (const Entry& e : entries_)
    if (e.model) out.push_back(e.model);
  return out;
}

}  // namespace folio::server
