// ModelPool: the models one server serves, by name. Each loads on first use
// (or at start for the first one), and unloads least recently used when a
// new one would pass the count or the memory budget, or when it has been idle
// longer than the keep-alive. A request for a model that is loading waits for
// it, bounded; a model with requests running is never unloaded under them
// (it is held by them, and unloaded only when no request holds it).
// Thread-safe: HTTP worker threads acquire, the serve loop sweeps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/api/generation_job.h"
#include "server/api/server_counters.h"

namespace folio::server {

// A model ready for requests: its engine and what the API reads of it.
struct ServedModel {
  std::shared_ptr<Engine> engine;
  ModelContext context;
  int max_choices_per_client = 0;
  std::unique_ptr<ChatTemplate> chat_template;  // --chat-template, when given
  ServerCounters* finished = nullptr;           // its finished requests, kept across unloads by the server
  std::string system_fingerprint;               // OutputFingerprint's id
};

// What a loader gives: the model and the bytes it holds (weights and KV).
struct LoadedModel {
  std::shared_ptr<const ServedModel> model;
  std::int64_t num_bytes = 0;
};

struct ModelSpec {
  std::string name;                   // the `model` requests name it by
  std::string source;                 // the file, directory or hub name it loads from
  std::int64_t estimated_bytes = 0;   // before it has loaded: what it is expected to hold
  std::function<LoadedModel()> load;  // runs on the thread of the request that needs it; none: never unloaded
};

struct ModelPoolLimits {
  int max_loaded = 0;                           // models loaded at once; 0: no cap
  std::int64_t max_bytes = 0;                   // their bytes together; 0: no budget
  std::chrono::milliseconds keep_alive{0};      // idle time before an unload; 0: never
  std::chrono::milliseconds load_wait{300000};  // how long a request waits for a load
};

enum class ModelState { kUnloaded, kLoading, kLoaded, kFailed };
const char* model_state_name(ModelState state);

struct ModelStatus {
  std::string name;
  std::string source;
  ModelState state = ModelState::kUnloaded;
  std::int64_t num_bytes = 0;  // loaded: measured; otherwise the estimate
  int num_holders = 0;         // requests holding it now
  double idle_s = 0;           // since it was last released or loaded
  std::string error;           // kFailed: why
};

class ModelPool {
 public:
  explicit ModelPool(ModelPoolLimits limits);

  // Registers a model, unloaded. Names are unique.
  void add(ModelSpec spec);
  // Registers a model that is already loaded (the one `folio serve -m` opened).
  void add_loaded(ModelSpec spec, LoadedModel loaded);

  // The model named `name` (the first registered when `name` is empty),
  // loading it first when it is not loaded. Throws ApiError: 404 for a name
  // not served, 503 when the load takes longer than the wait or room cannot
  // be made (every loaded model busy), 500 when it failed to load.
  std::shared_ptr<const ServedModel> acquire(const std::string& name);
  // The model when loaded, without loading it or touching its use time.
  std::shared_ptr<const ServedModel> peek(const std::string& name) const;
  // Unloads a model no request holds; false when it is not loaded, busy, or
  // has no loader to bring it back.
  bool unload(const std::string& name);
  // Unloads what has been idle past the keep-alive; the serve loop calls it.
  void sweep_idle();

  std::vector<ModelStatus> status() const;
  std::vector<std::string> names() const;
  std::string first_name() const;
  bool has(const std::string& name) const;
  const ModelPoolLimits& limits() const { return limits_; }
  // Every loaded model, for a drain at shutdown.
  std::vector<std::shared_ptr<const ServedModel>> loaded() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    ModelSpec spec;
    ModelState state = ModelState::kUnloaded;
    std::shared_ptr<const ServedModel> model;
    std::int64_t num_bytes = 0;
    Clock::time_point last_used{};
    std::string error;
  };

  Entry* find(const std::string& name);
  const Entry* find(const std::string& name) const;
  // Unloads idle models, least recently used first, until `incoming` (of
  // `num_bytes` when not yet counted) fits; false when it cannot. The
  // unloaded go to `dropped`, to be let go once mutex_ is released (an engine
  // stops its thread as it goes). Called with mutex_ held.
  bool make_room(const Entry& incoming, std::int64_t num_bytes,
                 std::vector<std::shared_ptr<const ServedModel>>& dropped);
  std::int64_t loaded_bytes() const;
  int num_loaded() const;
  static bool busy(const Entry& e) { return e.model && e.model.use_count() > 1; }

  ModelPoolLimits limits_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Entry> entries_;  // in registration order; the first is the default
};

}  // namespace folio::server
