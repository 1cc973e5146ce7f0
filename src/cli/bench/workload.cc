#include "cli/bench/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numbers>
#include <random>

#include "cli/commands.h"
#include "core/error.h"

namespace folio::cli {
namespace {

// The --dataset mix lengths: log-normal, as request lengths in chat traffic
// are (ShareGPT-style conversations: most prompts a few hundred tokens with a
// long tail of pasted documents, most answers around a hundred tokens, some
// much longer). Median exp(mu) and spread sigma of the underlying normal:
//   prompt: median 192 tokens, sigma 1.0 (mean ~317), clipped to [16, 2048]
//   output: median 128 tokens, sigma 0.7 (mean ~164), clipped to [8, 1024]
// Prompt and output lengths are drawn independently.
struct LogNormal {
  double median;
  double sigma;
  int min;
  int max;
};
constexpr LogNormal kMixPrompt{192, 1.0, 16, 2048};
constexpr LogNormal kMixOutput{128, 0.7, 8, 1024};

// mt19937_64's sequence is fixed by the standard; the transforms below are
// written out so that a seed gives the same workload with any library.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n).
  std::size_t below(std::size_t n) { return std::min(n - 1, static_cast<std::size_t>(uniform() * static_cast<double>(n))); }
  // Standard normal (Box-Muller).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  // Exponential with the given rate (gaps between Poisson arrivals).
  double exponential(double rate) { return -std::log(1.0 - uniform()) / rate; }

 private:
  std::mt19937_64 engine_;
};

int draw(Rng& rng, const LogNormal& d) {
  const double x = d.median * std::exp(d.sigma * rng.normal());
  return static_cast<int>(std::clamp(std::lround(x), static_cast<long>(d.min), static_cast<long>(d.max)));
}

}  // namespace

std::int64_t BenchWorkload::prompt_tokens() const {
  std::int64_t n = 0;
  for (const BenchRequest& r : requests) n += static_cast<std::int64_t>(r.prompt.size());
  return n;
}

std::int64_t BenchWorkload::output_tokens() const {
  std::int64_t n = 0;
  for (const BenchRequest& r : requests) n += r.output_len;
  return n;
}

int BenchWorkload::max_seq_len() const {
  int n = 0;
  for (const BenchRequest& r : requests) n = std::max(n, static_cast<int>(r.prompt.size()) + r.output_len);
  return n;
}

std::vector<TokenId> prompt_token_pool(const Vocab& vocab) {
  std::vector<TokenId> pool;
  for (TokenId id = 0; id < static_cast<TokenId>(vocab.size()); ++id)
    if (vocab.types[static_cast<std::size_t>(id)] == TokenType::kNormal) pool.push_back(id);
  if (pool.empty()) fail("the model's vocab has no normal tokens to build prompts from");
  return pool;
}

bool is_text_dataset(const std::string& dataset) { return dataset != "random" && dataset != "mix"; }

BenchWorkload make_workload(const WorkloadOptions& o, const std::vector<TokenId>& pool) {
  if (o.num_prompts < 1) fail("--num-prompts must be at least 1, got {}", o.num_prompts);
  if (!(o.request_rate > 0)) fail("--request-rate must be positive (inf: all at once), got {}", o.request_rate);
  const bool mix = o.dataset == "mix";
  if (!mix && o.dataset != "random") fail("--dataset {} is a text dataset, not random or mix", o.dataset);
  if (!mix && (o.input_len < 1 || o.output_len < 1))
    fail("--input-len and --output-len must be at least 1, got {} and {}", o.input_len, o.output_len);
  FOLIO_CHECK(!pool.empty());

  // Independent streams, so that changing the rate leaves prompts unchanged.
  Rng lengths(o.seed * 3 + 1), tokens(o.seed * 3 + 2), arrivals(o.seed * 3 + 3);
  BenchWorkload w;
  w.requests.resize(static_cast<std::size_t>(o.num_prompts));
  double t = 0;
  for (BenchRequest& r : w.requests) {
    const int input_len = mix ? draw(lengths, kMixPrompt) : o.input_len;
    r.output_len = mix ? draw(lengths, kMixOutput) : o.output_len;
    r.prompt.resize(static_cast<std::size_t>(input_len));
    for (TokenId& id : r.prompt) id = pool[tokens.below(pool.size())];
    r.arrival_s = t;
    if (std::isfinite(o.request_rate)) t += arrivals.exponential(o.request_rate);
  }
  return w;
}

std::vector<TextPrompt> read_text_prompts(const std::string& dataset) {
  std::string path = dataset;
  if (dataset == "grounded" || dataset == "chat") {
    path = find_near_binary({"bench/prompts/" + dataset + ".jsonl"});
    if (path.empty()) fail("cannot find bench/prompts/{}.jsonl; run from the source tree or give the file's path", dataset);
  }
  std::ifstream in(path);
  if (!in) fail("--dataset {}: cannot open {} (random, mix, grounded, chat or a JSON Lines file)", dataset, path);
  std::vector<TextPrompt> prompts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("{}:{}: not JSON: {}", path, number, e.what());
    }
    TextPrompt p;
    p.id = j.contains("id") && j["id"].is_string() ? j["id"].get<std::string>() : std::to_string(number);
    if (j.contains("messages") && j["messages"].is_array() && !j["messages"].empty()) {
      p.messages = j["messages"];
    } else if (j.contains("prompt") && j["prompt"].is_string()) {
      p.text = j["prompt"].get<std::string>();
    } else {
      fail("{}:{}: needs \"messages\" (a non-empty array) or \"prompt\" (a string)", path, number);
    }
    prompts.push_back(std::move(p));
  }
  if (prompts.empty()) fail("{} holds no prompts", path);
  return prompts;
}

BenchWorkload make_text_workload(const WorkloadOptions& o, const std::vector<TextPrompt>& prompts,
                                 const std::function<std::vector<TokenId>(const TextPrompt&)>& encode) {
  if (o.num_prompts < 1) fail("--num-prompts must be at least 1, got {}", o.num_prompts);
  if (o.output_len < 1) fail("--output-len must be at least 1, got {}", o.output_len);
  if (!(o.request_rate > 0)) fail("--request-rate must be positive (inf: all at once), got {}", o.request_rate);
  FOLIO_CHECK(!prompts.empty());
  Rng arrivals(o.seed * 3 + 3);
  BenchWorkload w;
  w.requests.resize(static_cast<std::size_t>(o.num_prompts));
  double t = 0;
  for (std::size_t i = 0; i < w.requests.size(); ++i) {
    BenchRequest& r = w.requests[i];
    const TextPrompt& p = prompts[(o.seed + i) % prompts.size()];
    r.prompt = encode(p);
    if (r.prompt.empty()) fail("prompt {} is empty after tokenization", p.id);
    r.output_len = o.output_len;
    r.ignore_eos = false;
    r.arrival_s = t;
    if (std::isfinite(o.request_rate)) t += arrivals.exponential(o.request_rate);
  }
  return w;
}

}  // namespace folio::cli
