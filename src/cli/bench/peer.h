// LlamaCppPeer: llama.cpp as a benchmark peer - bench/llama_cpp_peer.py run
// once under a Python that has llama-cpp-python, fed one workload per line on
// its stdin and answering with per-request timings on its stdout, so that the
// model stays loaded while folio and llama.cpp take turns.
#pragma once

#include <nlohmann/json.hpp>
#include <sys/types.h>

#include <cstdio>
#include <string>

#include "cli/bench/report.h"
#include "cli/bench/workload.h"

namespace folio::cli {

struct PeerOptions {
  std::string python;        // empty: build/venv-ref/bin/python, found near the folio binary or here
  std::string script;        // empty: bench/llama_cpp_peer.py, found the same way
  std::string model_path;
  int threads = 1;
  int max_num_seqs = 64;
  int max_num_batched_tokens = 512;
  int max_seq_len = 2048;    // per sequence slot: the longest prompt plus output
};

class LlamaCppPeer {
 public:
  // Starts the script and waits until the model is loaded; throws Error with
  // what to do when Python, the script or llama-cpp-python is missing.
  explicit LlamaCppPeer(const PeerOptions& options);
  ~LlamaCppPeer();
  LlamaCppPeer(const LlamaCppPeer&) = delete;
  LlamaCppPeer& operator=(const LlamaCppPeer&) = delete;

  RunTimings run(const BenchWorkload& workload, int max_concurrency);
  std::int64_t vocab_size() const { return info_.value("n_vocab", std::int64_t{0}); }
  // What the script says about itself once loaded (versions, settings).
  const nlohmann::json& info() const { return info_; }

 private:
  std::string read_line();
  void pause();   // SIGSTOP: the peer's threads cannot spin through folio's turn
  void resume();  // SIGCONT

  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string pending_;  // bytes read past the last line
  nlohmann::json info_;
};

}  // namespace folio::cli
