#include "cli/model_options.h"

#include "cli/commands.h"

namespace folio::cli {

ModelSessionOptions ModelOptions::resolved() const {
  ModelSessionOptions o = session;
  o.model_path = model.empty() ? default_model_path() : model;
  return o;
}

void add_model_options(CLI::App* cmd, ModelOptions& o) {
  cmd->add_option("-m,--model", o.model, "GGUF model file or Hugging Face directory (default: the default model in the models cache)");
  BackendOptions& b = o.session.backend;
  cmd->add_option("-t,--threads", b.num_threads, "CPU threads (default: one per hardware thread)");
  cmd->add_option("--backend", b.name,
                  "Backend: cpu, reference (scalar, the oracle) or sealed (cpu behind memory the host cannot read: "
                  "a check that nothing reads device memory)")
      ->check(CLI::IsMember(backend_names()));
  cmd->add_option("--precision", b.precision, "Matmul activations: q8 (fast) or f32 (accurate)")
      ->check(CLI::IsMember({"q8", "f32"}));
  cmd->add_option("--cpu-level", b.cpu_level, "Cap the SIMD level: avx512, avx2 or scalar")
      ->check(CLI::IsMember({"avx512", "avx2", "scalar"}));
}

std::shared_ptr<ModelSession> open_model(const ModelOptions& options) {
  ModelSessionOptions o = options.resolved();
  o.show_progress = true;
  return open_model_session(o);
}

}  // namespace folio::cli
