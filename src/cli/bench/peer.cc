#include "cli/bench/peer.h"

#include <nlohmann/json.hpp>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

extern char** environ;

namespace folio::cli {
namespace {

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("the llama.cpp peer stopped reading its input ({})", std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

LlamaCppPeer::LlamaCppPeer(const PeerOptions& o) {
  std::string python = o.python;
  if (python.empty()) python = find_near_binary({"venv-ref/bin/python", "build/venv-ref/bin/python"});
  if (python.empty())
    fail("no Python with llama-cpp-python found at build/venv-ref/bin/python; run scripts/setup_reference.sh "
         "or pass --peer-python");
  std::string script = o.script;
  if (script.empty()) script = find_near_binary({"bench/llama_cpp_peer.py"});
  if (script.empty()) fail("cannot find bench/llama_cpp_peer.py; run from the source tree or pass --peer-script");

  std::vector<std::string> args = {python,
                                   script,
                                   "--model",
                                   o.model_path,
                                   "--threads",
                                   std::to_string(o.threads),
                                   "--max-num-seqs",
                                   std::to_string(o.max_num_seqs),
                                   "--max-num-batched-tokens",
                                   std::to_string(o.max_num_batched_tokens),
                                   "--max-seq-len",
                                   std::to_string(o.max_seq_len)};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) fail("cannot create pipes for the llama.cpp peer: {}", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  for (int fd : {in[0], in[1], out[0], out[1]}) posix_spawn_file_actions_addclose(&actions, fd);
  const int rc = posix_spawn(&pid_, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  if (rc != 0) {
    pid_ = -1;
    fail("cannot start {}: {}", python, std::strerror(rc));
  }
  info_ = nlohmann::json::parse(read_line());
  pause();
}

// Between its turns the peer is stopped (SIGSTOP), not merely idle: with
// OpenMP's active wait policy llama.cpp's idle threads spin for a while after
// each llama_decode and would take the cores from folio's turn. Stopped, they
// cost nothing, so each engine has the machine to itself on its turn whatever
// OMP_WAIT_POLICY says.
void LlamaCppPeer::pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void LlamaCppPeer::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

LlamaCppPeer::~LlamaCppPeer() {
  resume();
  if (to_child_ >= 0) ::close(to_child_);  // end of input: the script exits
  if (from_child_ >= 0) ::close(from_child_);
  if (pid_ > 0) {
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

std::string LlamaCppPeer::read_line() {
  for (;;) {
    if (const std::size_t eol = pending_.find('\n'); eol != std::string::npos) {
      std::string line = pending_.substr(0, eol);
      pending_.erase(0, eol + 1);
      return line;
    }
    char buf[1 << 16];
    const ssize_t n = ::read(from_child_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      fail("the llama.cpp peer exited early (see its messages above; is llama-cpp-python installed in that Python? "
           "scripts/setup_reference.sh installs it)");
    pending_.append(buf, static_cast<std::size_t>(n));
  }
}

RunTimings LlamaCppPeer::run(const BenchWorkload& workload, int max_concurrency) {
  nlohmann::json requests = nlohmann::json::array();
  for (const BenchRequest& r : workload.requests)
    requests.push_back({{"prompt", r.prompt},
                        {"output_len", r.output_len},
                        {"arrival_s", r.arrival_s},
                        {"ignore_eos", r.ignore_eos}});
  const nlohmann::json work{{"requests", std::move(requests)}, {"max_concurrency", max_concurrency}};
  resume();
  write_all(to_child_, work.dump() + "\n");
  const std::string answer = read_line();
  pause();
  return timings_from_json(nlohmann::json::parse(answer));
}

}  // namespace folio::cli
