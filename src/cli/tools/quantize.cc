// `folio quantize IN OUT --type T`: rewrites a GGUF model's weights in
// another type (offline/quantizer.h), optionally weighting each block's error
// by activation statistics from calibration text (engine/calibration.h).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "cli/commands.h"
#include "core/error.h"
#include "core/read_file.h"
#include "offline/awq.h"
#include "offline/calibration.h"
#include "offline/linalg.h"
#include "offline/quantizer.h"

namespace folio::cli {
namespace {

struct QuantizeCliOptions {
  std::string input;
  std::string output;
  std::string type;
  std::string calibration;
  std::string method = "imatrix";
  double gptq_damp = GptqOptions{}.damp;
  std::int64_t calibration_ctx = 512;
  std::int64_t calibration_chunks = 0;
  std::vector<std::string> tensor_types;  // NAME=TYPE
  int threads = 0;
  bool dry_run = false;
  bool reference_scales = false;
};

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

std::unordered_map<std::string, DType> parse_overrides(const std::vector<std::string>& items) {
  std::unordered_map<std::string, DType> out;
  for (const std::string& item : items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) fail("--tensor-type {}: expected NAME=TYPE, e.g. output.weight=q8_0", item);
    const std::optional<DType> t = parse_dtype(item.substr(eq + 1));
    if (!t) fail("--tensor-type {}: unknown type \"{}\"", item, item.substr(eq + 1));
    out[item.substr(0, eq)] = *t;
  }
  return out;
}

void run(const QuantizeCliOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const std::optional<QuantRecipe> recipe = parse_quant_recipe(o.type);
  if (!recipe) fail("unknown --type \"{}\"; folio quantizes to {}", o.type, fmt::join(quant_recipe_names(), ", "));
  if (o.input == o.output) fail("the output must be another file than the input");
  const GgufFile in = GgufFile::open(o.input);

  QuantizeOptions options;
  options.recipe = *recipe;
  const bool gptq = o.method == "gptq" || o.method == "awq+gptq";
  const bool awq_scales = o.method == "awq" || o.method == "awq+gptq";
  const bool covariances = gptq || awq_scales;
  if (covariances) {
    if (o.calibration.empty())
      fail("--method {} needs --calibration: it works from the activations of calibration text", o.method);
    linalg::require();
  }
  if (gptq) options.method = QuantMethod::kGptq;
  options.gptq.damp = o.gptq_damp;
  options.threads = o.threads;
  options.reference_scales = o.reference_scales;
  options.overrides = parse_overrides(o.tensor_types);
  for (const auto& [tensor, type] : options.overrides)
    if (in.find_tensor(tensor) == nullptr) fail("--tensor-type: {} has no tensor {}", o.input, tensor);
  const std::vector<TensorQuantPlan> plan = plan_quantization(in, options.recipe, options.overrides);

  std::set<std::string> quantized_inputs;
  for (const TensorQuantPlan& p : plan)
    if (p.to != p.from && !is_float(p.from) && !is_float(p.to))
      quantized_inputs.insert(std::string(name(p.from)));
  fmt::print(stderr, "{}: {} tensors, {:.1f} MiB -> {} as {}\n", o.input, in.tensors().size(),
             mib(in.file_size()), o.output, recipe->name);
  if (!quantized_inputs.empty())
    fmt::print(stderr,
               "warning: requantizing weights that are already {}: their rounding errors add up; "
               "quantize from an F16, BF16 or F32 model for the best quality\n",
               fmt::join(quantized_inputs, ", "));

  CalibrationResult calibration;
  if (!o.calibration.empty()) {
    ModelSessionOptions session;
    session.model_path = o.input;
    session.backend.num_threads = o.threads;
    PerplexityOptions windows;
    windows.ctx = o.calibration_ctx;
    windows.max_chunks = o.calibration_chunks;
    const auto calibration_start = Clock::now();
    const bool tty = ::isatty(STDERR_FILENO) == 1;  // a live line at a terminal, one line per window in a log
    calibration = calibrate(session, read_file(o.calibration), windows,
                            [tty](std::int64_t done, std::int64_t total, double ppl) {
      fmt::print(stderr, "{}calibrating: window {}/{}, perplexity {:.3f}{}", tty ? "\r" : "", done, total, ppl,
                 !tty || done == total ? "\n" : "");
    }, covariances);
    fmt::print(stderr, "calibration: {} windows of {}, {} tokens, activation statistics of {} weights, {:.1f} s\n",
               calibration.windows, o.calibration, calibration.importance.tokens, calibration.importance.columns.size(),
               std::chrono::duration<double>(Clock::now() - calibration_start).count());
    options.importance = &calibration.importance;
  }
  AwqScales awq;
  if (awq_scales) {
    const auto search_start = Clock::now();
    ThreadPool pool(o.threads);
    awq = search_awq_scales(in, plan, calibration.importance, pool);
    if (!gptq) calibration.importance.covariances.clear();  // gigabytes, needed no more
    std::vector<double> alphas;
    double error = 0.0, unscaled = 0.0;
    for (const AwqGroup& g : awq.groups) {
      alphas.push_back(g.alpha);
      error += g.error;
      unscaled += g.unscaled;
    }
    std::sort(alphas.begin(), alphas.end());
    fmt::print(stderr, "AWQ: {} groups searched, {} scaled (median alpha {:.3f}), calibration output error {:+.1f}% "
               "against unscaled, {:.1f} s\n", awq.groups.size(),
               std::count_if(alphas.begin(), alphas.end(), [](double a) { return a > 0.0; }),
               alphas.empty() ? 0.0 : alphas[alphas.size() / 2], unscaled > 0.0 ? 100.0 * (error / unscaled - 1.0) : 0.0,
               std::chrono::duration<double>(Clock::now() - search_start).count());
    options.awq = &awq;
  }

  auto print_plan = [&](std::size_t i, std::size_t count, const TensorQuantPlan& p) {
    const GgufTensorInfo& t = in.tensors()[i];
    std::string shape = std::to_string(t.shape[0]);
    for (int d = 1; d < t.num_dims; ++d) shape += fmt::format(" x {}", t.shape[static_cast<std::size_t>(d)]);
    const std::uint64_t out_bytes = static_cast<std::uint64_t>(row_bytes(p.to, t.shape[0])) *
                                    static_cast<std::uint64_t>(t.rows());
    fmt::print("[{:>4}/{}] {:<32} {:>5} -> {:<5} [{}] {:.2f} -> {:.2f} MiB{}\n", i + 1, count, t.name, name(p.from),
               name(p.to), shape, mib(t.size_bytes), mib(out_bytes), p.why.empty() ? "" : "  (" + p.why + ")");
    std::fflush(stdout);
  };
  if (o.dry_run) {
    for (std::size_t i = 0; i < plan.size(); ++i) print_plan(i, plan.size(), plan[i]);
    return;
  }
  const QuantizeSummary s = quantize_gguf(in, o.output, options, print_plan);
  fmt::print(stderr,
             "{}: {:.1f} MiB of weights -> {:.1f} MiB ({:.2f} bits per weight), {:.1f} M parameters, "
             "{} tensors weighted by calibration ({} by GPTQ, {} rescaled by AWQ), {:.1f} s\n",
             o.output, mib(s.input_bytes), mib(s.output_bytes), s.bits_per_weight(),
             static_cast<double>(s.parameters) / 1e6, s.weighted, s.gptq, s.awq_scaled,
             std::chrono::duration<double>(Clock::now() - start).count());
  if (s.gptq_short > 0)
    fmt::print(stderr,
               "GPTQ: {} tensors took imatrix weighting instead: their calibration had fewer tokens than inputs "
               "({}: {} tokens, {} inputs), too few to fit GPTQ's corrections without overfitting the text; "
               "calibrate with at least {} tokens (more text, or --calibration-chunks) to use GPTQ on them\n",
               s.gptq_short, s.gptq_short_example, s.gptq_short_rows, s.gptq_short_cols, s.gptq_short_cols);
}

}  // namespace

void add_quantize(CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize", "Write a GGUF model with its weights in another type");
  auto o = std::make_shared<QuantizeCliOptions>();
  cmd->add_option("input", o->input, "GGUF model to read")->required();
  cmd->add_option("output", o->output, "GGUF file to write")->required();
  cmd->add_option("--type", o->type,
                  fmt::format("Target: {} (q4_k = q4_k_m, q5_k = q5_k_m)", fmt::join(quant_recipe_names(), ", ")))
      ->required();
  cmd->add_option("--calibration", o->calibration,
                  "Text file: weight each block's rounding error by the activations this text produces");
  cmd->add_option("--method", o->method,
                  "With --calibration: imatrix (each block's error weighted by its columns' activations), gptq "
                  "(each column's error compensated in the columns after it, GPTQ) or awq (salient input channels "
                  "scaled up, the inverse folded into the norm or matrix before, AWQ) or awq+gptq (AWQ's scales, "
                  "then GPTQ)")
      ->check(CLI::IsMember({"imatrix", "gptq", "awq", "awq+gptq"}));
  cmd->add_option("--gptq-damp", o->gptq_damp,
                  "GPTQ: added to the covariance's diagonal, as a fraction of its mean (more: closer to imatrix)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--calibration-ctx", o->calibration_ctx, "Tokens per calibration window");
  cmd->add_option("--calibration-chunks", o->calibration_chunks, "Calibrate on at most this many windows (0: all)");
  cmd->add_option("--tensor-type", o->tensor_types, "NAME=TYPE: force one tensor's type (repeatable)");
  cmd->add_option("-t,--threads", o->threads, "CPU threads (default: one per hardware thread)");
  cmd->add_flag("--reference-scales", o->reference_scales,
                "q4_0 .. q8_0 with the reference encoder's scales (what the gguf package writes) instead of searched "
                "ones (ignored with --calibration)");
  cmd->add_flag("--dry-run", o->dry_run, "Print each tensor's type and size and write nothing");
  cmd->callback([o] { run(*o); });
}

}  // namespace folio::cli
