#include "cli/startup_budget.h"

#include <fmt/format.h>

#include <algorithm>

#if FOLIO_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace folio::cli {
namespace {

std::string size(double bytes) {
  if (bytes >= double(1 << 30)) return fmt::format("{:.2f} GiB", bytes / double(1 << 30));
  return fmt::format("{:.0f} MiB", bytes / double(1 << 20));
}

std::string grouped(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

}  // namespace

std::string startup_budget(const ModelSession& session, const Engine& engine) {
  const EngineStats st = engine.stats();
  const std::int64_t tokens = static_cast<std::int64_t>(st.kv.num_blocks) * st.kv.block_size;
  const std::int64_t ctx = std::max(1, engine.max_model_len());
  const std::int64_t short_ctx = std::min<std::int64_t>(1024, ctx);
  std::string kv = fmt::format("KV cache {} ({} tokens: {} users of {} tokens, or {} of {})",
                               size(static_cast<double>(st.kv_bytes)), grouped(tokens), grouped(tokens / ctx),
                               grouped(ctx), grouped(tokens / short_ctx), grouped(short_ctx));
  // A hybrid model's state cache: fixed per sequence, whatever its context.
  if (st.state_bytes > 0)
    kv += fmt::format(", state cache {} ({} sequences)", size(static_cast<double>(st.state_bytes)),
                      grouped(st.state_slots));
  const double weights = static_cast<double>(session.loaded.weights->total_bytes());
#if FOLIO_CUDA
  if (const auto* cuda = dynamic_cast<const CudaBackend*>(session.backend.get())) {
    const CudaMemoryUse m = cuda->memory_use();
    const double rest = static_cast<double>(m.buffer_bytes + m.scratch_bytes) - static_cast<double>(st.kv_bytes) -
                        static_cast<double>(st.state_bytes);
    return fmt::format("cuda {} ({}): weights {}, {}, activations and staging {}, {} free", m.device_name,
                       size(static_cast<double>(m.total_bytes)), size(static_cast<double>(m.weight_bytes)), kv,
                       size(std::max(0.0, rest)), size(static_cast<double>(m.free_bytes)));
  }
#endif
  return fmt::format("{}: weights {}, {}", session.backend->name(), size(weights), kv);
}

}  // namespace folio::cli
