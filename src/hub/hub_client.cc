#include "hub/hub_client.h"

#include <curl/curl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/version.h"

namespace folio::hub {
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kMaxInfoBytes = 64 << 20;  // a repository listing larger than this is refused

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
  std::size_t start = 0;
  while (start < s.size() && s[start] == ' ') ++start;
  return s.substr(start);
}

// Percent-encodes a repository path for a URL, keeping its slashes.
std::string encode_path(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace

HubSettings HubSettings::from_environment() {
  HubSettings s;
  if (std::string e = env("HF_ENDPOINT"); !e.empty()) {
    while (!e.empty() && e.back() == '/') e.pop_back();
    s.endpoint = e;
  }
  s.token = env("HF_TOKEN");
  if (s.token.empty()) s.token = env("HUGGING_FACE_HUB_TOKEN");
  if (s.token.empty()) {
    const std::string home = env("HF_HOME");
    const fs::path file =
        home.empty() ? fs::path(env("HOME")) / ".cache" / "huggingface" / "token" : fs::path(home) / "token";
    std::ifstream in(file);
    std::getline(in, s.token);
    s.token = trim(s.token);
  }
  return s;
}

struct HubClient::Response {
  long status = 0;
  CURLcode code = CURLE_OK;
  std::string error;                           // curl's words when code is not OK
  std::string body;                            // when not appending to a file
  std::map<std::string, std::string> headers;  // of the last response, names in lower case

  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

namespace {

// What one transfer writes and reads as it goes.
struct Transfer {
  std::string* body = nullptr;
  std::FILE* file = nullptr;
  std::int64_t offset = 0;  // bytes already in the file (a resumed download)
  bool restarted = false;   // the server sent the whole file, not the range asked
  long status = 0;          // of the response being read (redirects have their own)
  std::map<std::string, std::string>* headers = nullptr;
  const Progress* progress = nullptr;
  std::int64_t total = 0;
  std::int64_t written = 0;
  std::int64_t limit = kMaxInfoBytes;
};

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string line(data, size * count);
  if (line.starts_with("HTTP/")) {
    const std::size_t space = line.find(' ');
    t->status = space == std::string::npos ? 0 : std::atol(line.c_str() + space + 1);
    t->headers->clear();
  } else if (const std::size_t colon = line.find(':'); colon != std::string::npos) {
    (*t->headers)[lower(line.substr(0, colon))] = trim(line.substr(colon + 1));
  }
  return size * count;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t n = size * count;
  if (t->status >= 300) return n;  // an error's body or a redirect's: not the file
  if (t->file != nullptr) {
    if (t->status == 200 && t->offset > 0 && !t->restarted) {
      // The server ignored the range: start the file again.
      t->restarted = true;
      if (std::fflush(t->file) != 0 || ftruncate(fileno(t->file), 0) != 0) return 0;
      t->offset = 0;
    }
    if (std::fwrite(data, 1, n, t->file) != n) return 0;
  } else {
    if (static_cast<std::int64_t>(t->body->size() + n) > t->limit) return 0;
    t->body->append(data, n);
  }
  t->written += static_cast<std::int64_t>(n);
  return n;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->progress != nullptr && *t->progress && t->file != nullptr && t->status < 300)
    (*t->progress)(t->offset + t->written, t->total);
  return 0;
}

}  // namespace

HubClient::HubClient(HubSettings settings) : settings_(std::move(settings)) { global_init(); }

HubClient::~HubClient() = default;

std::string HubClient::url(const std::string& path) const { return settings_.endpoint + path; }

HubClient::Response HubClient::get(const std::string& u, const fs::path* append_to, std::int64_t offset,
                                   const Progress& progress, std::int64_t total) {
  Response r;
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) throw HubError(0, "could not start an HTTP transfer (curl_easy_init)");
  Transfer t;
  t.headers = &r.headers;
  t.progress = &progress;
  t.total = total;
  t.offset = offset;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(nullptr, std::fclose);
  if (append_to != nullptr) {
    file.reset(std::fopen(append_to->c_str(), offset > 0 ? "ab" : "wb"));
    if (!file) throw HubError(0, fmt::format("could not write {}", append_to->string()));
    t.file = file.get();
  } else {
    t.body = &r.body;
  }
  curl_slist* headers = nullptr;
  const std::string agent = std::string("User-Agent: folio/") + version_string();
  headers = curl_slist_append(headers, agent.c_str());
  // A custom Authorization header is not sent on to another host a redirect
  // leads to (libcurl since 7.58), so the token stays with the hub.
  const std::string auth = "Authorization: Bearer " + settings_.token;
  if (!settings_.token.empty()) headers = curl_slist_append(headers, auth.c_str());
  const std::string range = fmt::format("Range: bytes={}-", offset);
  if (offset > 0) headers = curl_slist_append(headers, range.c_str());
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, curl_slist_free_all);
  char error[CURL_ERROR_SIZE] = {};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, u.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  // A transfer that moves under a byte a second for a minute is cut (and resumed).
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  r.code = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  if (r.code != CURLE_OK) r.error = error[0] != '\0' ? error : curl_easy_strerror(r.code);
  if (file && std::fflush(file.get()) != 0) throw HubError(0, fmt::format("could not write {}", append_to->string()));
  return r;
}

namespace {

// Why the hub said no, and what to do.
[[noreturn]] void refused(long status, const std::string& what, const std::string& repo, const std::string& code,
                          bool has_token) {
  if (status == 401 || status == 403) {
    if (has_token)
      throw HubError(static_cast<int>(status),
                     fmt::format("the hub refused {} ({}{}): the token in HF_TOKEN may not read {}; accept the "
                                 "model's terms on its page and use a token of that account",
                                 what, status, code.empty() ? "" : ", " + code, repo));
    throw HubError(static_cast<int>(status),
                   fmt::format("the hub refused {} ({}{}): {} is gated or private; accept its terms on its page and "
                               "set HF_TOKEN to a read token of that account",
                               what, status, code.empty() ? "" : ", " + code, repo));
  }
  if (status == 404)
    throw HubError(404, fmt::format("the hub has no {} (404{}): check the repository's name and revision", what,
                                    code.empty() ? "" : ", " + code));
  throw HubError(static_cast<int>(status), fmt::format("the hub answered {} for {}", status, what));
}

}  // namespace

RepoInfo HubClient::repo_info(const std::string& repo, const std::string& revision) {
  const std::string u = url(fmt::format("/api/models/{}/revision/{}?blobs=true", repo, encode_path(revision)));
  for (int attempt = 0;; ++attempt) {
    Response r = get(u, nullptr, 0, {}, 0);
    if (r.code != CURLE_OK)
      throw HubError(0, fmt::format("could not reach {} ({}); check the network, or set HF_HUB_OFFLINE=1 to use only "
                                    "what is cached",
                                    settings_.endpoint, r.error));
    if ((r.status == 429 || r.status >= 500) && attempt < settings_.max_retries) {
      const long wait = std::clamp<long>(std::atol(r.header("retry-after").c_str()), 1, settings_.max_wait_s);
      std::this_thread::sleep_for(std::chrono::seconds(wait));
      continue;
    }
    if (r.status == 429)
      throw HubError(429, fmt::format("the hub is limiting requests (429) and still was after {} tries; wait and "
                                      "pull again",
                                      attempt + 1));
    if (r.status != 200)
      refused(r.status, fmt::format("{} at revision {}", repo, revision), repo, r.header("x-error-code"),
              !settings_.token.empty());
    const auto json = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || !json.is_object() || !json.contains("siblings") || !json["siblings"].is_array())
      throw HubError(static_cast<int>(r.status),
                     fmt::format("the hub's listing of {} is not what its API describes (no `siblings`)", repo));
    RepoInfo info;
    info.commit = json.value("sha", std::string());
    for (const auto& s : json["siblings"]) {
      if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
      RepoFile f;
      f.path = s["rfilename"].get<std::string>();
      if (s.contains("size") && s["size"].is_number_integer()) f.size = s["size"].get<std::int64_t>();
      if (s.contains("blobId") && s["blobId"].is_string()) f.blob_id = s["blobId"].get<std::string>();
      if (const auto lfs = s.find("lfs"); lfs != s.end() && lfs->is_object()) {
        f.sha256 = lfs->value("sha256", std::string());
        if (lfs->contains("size") && (*lfs)["size"].is_number_integer()) f.size = (*lfs)["size"].get<std::int64_t>();
      }
      info.files.push_back(std::move(f));
    }
    return info;
  }
}

void HubClient::download(const std::string& repo, const std::string& commit, const RepoFile& file, const fs::path& dest,
                         const Progress& progress) {
  const std::string u = url(fmt::format("/{}/resolve/{}/{}", repo, commit, encode_path(file.path)));
  int tries_without_progress = 0;
  for (;;) {
    std::error_code ec;
    std::int64_t have = fs::exists(dest, ec) ? static_cast<std::int64_t>(fs::file_size(dest, ec)) : 0;
    if (have > file.size) have = 0;  // not a prefix of this file: start again
    if (have == file.size && file.size > 0) return;
    Response r = get(u, &dest, have, progress, file.size);
    std::int64_t now = fs::exists(dest, ec) ? static_cast<std::int64_t>(fs::file_size(dest, ec)) : 0;
    if (r.status == 416) {  // the range lies past the end: what is there is not this file
      fs::resize_file(dest, 0, ec);
      now = 0;
    } else if (r.code == CURLE_OK && r.status != 200 && r.status != 206) {
      if ((r.status == 429 || r.status >= 500) && tries_without_progress < settings_.max_retries) {
        ++tries_without_progress;
        const long wait = std::clamp<long>(std::atol(r.header("retry-after").c_str()), 1, settings_.max_wait_s);
        std::this_thread::sleep_for(std::chrono::seconds(wait));
        continue;
      }
      refused(r.status, fmt::format("{} of {}", file.path, repo), repo, r.header("x-error-code"),
              !settings_.token.empty());
    }
    if (now == file.size && (r.code == CURLE_OK || file.size > 0)) return;
    // Cut short: resume from what arrived, as long as each try brings something.
    tries_without_progress = now > have ? 0 : tries_without_progress + 1;
    if (tries_without_progress > settings_.max_retries)
      throw HubError(static_cast<int>(r.status),
                     fmt::format("the download of {} from {} stopped at {} of {} bytes {} times in a row ({}); run "
                                 "the pull again to resume",
                                 file.path, repo, now, file.size, tries_without_progress,
                                 r.code != CURLE_OK ? r.error : "the connection closed early"));
  }
}

}  // namespace folio::hub
