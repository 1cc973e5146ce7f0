#include "cli/model_options.h"

#include "cli/commands.h"
#include "core/error.h"
#include "model/dummy_model.h"

namespace folio::cli {

ModelSessionOptions ModelOptions::resolved() const {
  ModelSessionOptions o = session;
  if (o.load_format == "dummy" && model.empty()) {
    std::string names;
    for (const std::string& n : dummy_preset_names()) names += (names.empty() ? "" : ", ") + n;
    fail("--load-format dummy needs a preset: -m one of {}", names);
  }
  o.model_path = o.load_format == "dummy" ? model : resolve_model(model);
  if (!activations.empty()) o.backend.activations = *parse_dtype(activations);  // checked by the flag
  return o;
}

void add_model_options(CLI::App* cmd, ModelOptions& o, bool several) {
  if (several) {
    cmd->add_option("-m,--model", o.models,
                    "GGUF model file, Hugging Face directory or hub name (default: "
                    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf in the models cache); repeat it to serve several, each "
                    "as NAME=MODEL or under its own name; the first is the default and loads at start");
  } else {
    cmd->add_option("-m,--model", o.model,
                    "GGUF model file, Hugging Face directory or hub name (default: "
                    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf in the models cache)");
  }
  BackendOptions& b = o.session.backend;
  cmd->add_option("-t,--threads", b.num_threads, "CPU threads (default: one per hardware thread)");
  cmd->add_option("--backend", b.name,
                  "Backend: cpu, reference (scalar, the oracle), sealed (cpu behind memory the host cannot read: "
                  "a check that nothing reads device memory), deferred (sealed, its calls run later on a worker thread: a "
                  "check that staging is not rewritten under a queued copy), or cuda where folio was built with it")
      ->check(CLI::IsMember(backend_names()));
  cmd->add_option("--load-format", o.session.load_format,
                  "auto (read the model) or dummy: random weights of the preset -m names (see --dummy-weights)")
      ->check(CLI::IsMember({"auto", "dummy"}));
  cmd->add_option("--dummy-weights", o.session.dummy_weights,
                  "With --load-format dummy: the weight types, as a folio quantize recipe (default q4_k_m)");
  cmd->add_option("--activations", o.activations,
                  "Activation type: f32 (default), or bf16 on cuda (f16 too on reference)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_flag("!--no-batch-invariance", b.batch_invariant,
                "cuda: matmuls of more than 8 rows through cuBLAS (faster prefill; a row's bits then depend on its "
                "batch)");
  cmd->add_option("--precision", b.precision, "Matmul activations: q8 (fast) or f32 (accurate)")
      ->check(CLI::IsMember({"q8", "f32"}));
  cmd->add_option("--cpu-level", b.cpu_level, "Cap the SIMD level: avx512, avx2 or scalar")
      ->check(CLI::IsMember({"avx512", "avx2", "scalar"}));
}

std::shared_ptr<ModelSession> open_model(const ModelOptions& options) { return open_model(options.resolved()); }

std::shared_ptr<ModelSession> open_model(ModelSessionOptions resolved) {
  resolved.show_progress = true;
  return open_model_session(resolved);
}

}  // namespace folio::cli
