#include "hub/pull.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>

#include "core/error.h"

namespace folio::hub {
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// One model file of a GGUF repository: a whole file, or the parts of a split
// one (NAME-00001-of-00003.gguf ...), in order.
struct GgufModel {
  std::string key;  // the path, without its part suffix
  std::vector<std::string> parts;
};

std::vector<GgufModel> gguf_models(const std::vector<std::string>& files) {
  static const std::regex kPart(R"((.*)-(\d{5})-of-(\d{5})\.gguf)", std::regex::icase);
  std::map<std::string, GgufModel> by_key;
  for (const std::string& f : files) {
    if (!ends_with(lower(f), ".gguf")) continue;
    const std::string base = lower(fs::path(f).filename().string());
    if (base.starts_with("mmproj")) continue;  // a vision projector, not a language model
    std::smatch m;
    const std::string key = std::regex_match(f, m, kPart) ? m[1].str() : f;
    GgufModel& g = by_key[key];
    g.key = key;
    g.parts.push_back(f);
  }
  std::vector<GgufModel> out;
  for (auto& [key, g] : by_key) {
    std::sort(g.parts.begin(), g.parts.end());
    out.push_back(std::move(g));
  }
  return out;
}

// Whether the path names the quant tag as a word of its own (-Q4_K_M., /q4_k_m-).
bool has_tag(const std::string& path, const std::string& tag) {
  const std::string p = lower(path), t = lower(tag);
  for (std::size_t at = p.find(t); at != std::string::npos; at = p.find(t, at + 1)) {
    const bool before = at == 0 || !std::isalnum(static_cast<unsigned char>(p[at - 1]));
    const std::size_t end = at + t.size();
    const bool after = end == p.size() || !std::isalnum(static_cast<unsigned char>(p[end]));
    if (before && after) return true;
  }
  return false;
}

// The files of a safetensors checkpoint folio reads: weights, configs,
// tokenizer, chat template and sentence-transformers' modules.
bool checkpoint_file(const std::string& f) {
  const std::string l = lower(f);
  const bool top = l.find('/') == std::string::npos;
  if (top) {
    return ends_with(l, ".safetensors") || ends_with(l, ".json") || ends_with(l, ".jinja") || l == "tokenizer.model" ||
           l == "vocab.txt" || l == "merges.txt";
  }
  // sentence-transformers' modules: 1_Pooling/config.json, 2_Dense/..., 2_Normalize.
  static const std::regex kModule(R"(\d+_[a-z]+/[^/]+\.(json|safetensors))");
  return std::regex_match(l, kModule);
}

std::string digest_of_file(const fs::path& path, const EVP_MD* md, const std::string& prefix) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), md, nullptr) != 1) fail("could not start a hash");
  EVP_DigestUpdate(ctx.get(), prefix.data(), prefix.size());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("could not read {}", path.string());
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &size);
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

// Whether a cached or fresh blob is the file the hub lists.
bool verified(const fs::path& blob, const RepoFile& f) {
  std::error_code ec;
  if (!fs::exists(blob, ec) || static_cast<std::int64_t>(fs::file_size(blob, ec)) != f.size) return false;
  if (!f.sha256.empty()) return sha256_of_file(blob) == lower(f.sha256);
  if (!f.blob_id.empty()) return git_blob_id_of_file(blob) == lower(f.blob_id);
  return true;
}

// A path inside a repository that stays inside the snapshot folder.
bool safe_path(const std::string& p) {
  if (p.empty() || p.front() == '/' || p.find('\\') != std::string::npos) return false;
  for (const auto& part : fs::path(p))
    if (part == ".." || part == "." || part.empty()) return false;
  return true;
}

std::string list(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < 12; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 12) out += fmt::format(", ... ({} in all)", names.size());
  return out;
}

}  // namespace

std::string sha256_of_file(const fs::path& path) { return digest_of_file(path, EVP_sha256(), ""); }

std::string git_blob_id_of_file(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  std::string prefix = fmt::format("blob {}", size);
  prefix.push_back('\0');
  return digest_of_file(path, EVP_sha1(), prefix);
}

FilePick pick_files(const ModelRef& ref, const std::vector<std::string>& repo_files) {
  FilePick pick;
  const std::vector<GgufModel> ggufs = gguf_models(repo_files);
  auto take = [&](const GgufModel& g) {
    pick.files = g.parts;
    pick.model = g.parts.front();
    return pick;
  };
  if (!ref.file.empty()) {
    for (const GgufModel& g : ggufs)
      if (std::find(g.parts.begin(), g.parts.end(), ref.file) != g.parts.end()) return take(g);
    if (std::find(repo_files.begin(), repo_files.end(), ref.file) == repo_files.end())
      fail("{} has no file {}; it has {}", ref.repo, ref.file, list(repo_files));
    pick.files = {ref.file};
    pick.model = ref.file;
    return pick;
  }
  if (!ggufs.empty()) {
    std::vector<const GgufModel*> fits;
    const std::string tag = ref.quant.empty() ? "Q4_K_M" : ref.quant;  // llama.cpp's -hf default too
    for (const GgufModel& g : ggufs)
      if (has_tag(g.key, tag)) fits.push_back(&g);
    if (fits.empty() && ref.quant.empty() && ggufs.size() == 1) return take(ggufs.front());
    std::vector<std::string> names;
    for (const GgufModel& g : ggufs) names.push_back(g.parts.size() > 1 ? g.key + " (split)" : g.key);
    if (fits.empty())
      fail("{} has no GGUF file of quant {}{}; it has {} (name one as {}:TAG or {}/FILE)", ref.repo, tag,
           ref.quant.empty() ? " (the default when none is named)" : "", list(names), ref.repo, ref.repo);
    if (fits.size() > 1) {
      std::vector<std::string> fit_names;
      for (const GgufModel* g : fits) fit_names.push_back(g->parts.front());
      fail("{} has {} GGUF files of quant {}: {}; name one as {}/FILE", ref.repo, fits.size(), tag, list(fit_names),
           ref.repo);
    }
    return take(*fits.front());
  }
  if (!ref.quant.empty()) fail("{} has no GGUF files, so a quant tag (:{}) picks nothing", ref.repo, ref.quant);
  for (const std::string& f : repo_files)
    if (checkpoint_file(f)) pick.files.push_back(f);
  const bool has_config = std::find(pick.files.begin(), pick.files.end(), "config.json") != pick.files.end();
  const bool has_weights = std::any_of(pick.files.begin(), pick.files.end(),
                                       [](const std::string& f) { return ends_with(lower(f), ".safetensors"); });
  if (!has_config || !has_weights)
    fail("{} holds neither GGUF files nor a safetensors checkpoint (config.json and *.safetensors); it has {}",
         ref.repo, list(repo_files));
  return pick;
}

PullOptions PullOptions::from_environment() {
  PullOptions o;
  if (const char* v = std::getenv("HF_HUB_OFFLINE")) {
    const std::string s = lower(v);
    o.offline = s == "1" || s == "true" || s == "yes" || s == "on";
  }
  return o;
}

PullResult pull_model(const ModelRef& ref, const HubCache& cache, HubClient* client, const PullOptions& options) {
  PullResult result;
  if (options.offline || client == nullptr) {
    const std::optional<std::string> commit = cache.commit_of(ref.repo, ref.revision);
    if (!commit)
      fail(
          "{} is not in the cache ({}) and HF_HUB_OFFLINE is set: pull it once with the network, or unset "
          "HF_HUB_OFFLINE",
          ref.text(), cache.repo_dir(ref.repo).string());
    result.commit = *commit;
    result.snapshot = cache.snapshot(ref.repo, *commit);
    std::vector<std::string> files;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(result.snapshot, ec); it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (!it->is_directory()) files.push_back(it->path().lexically_relative(result.snapshot).generic_string());
    std::sort(files.begin(), files.end());
    const FilePick pick = pick_files(ref, files);
    for (const std::string& f : pick.files)
      if (!fs::exists(result.snapshot / f))
        fail("{} is cached only in part ({} is missing) and HF_HUB_OFFLINE is set: pull it again with the network",
             ref.text(), f);
    result.files = pick.files;
    result.model = pick.model.empty() ? result.snapshot : result.snapshot / pick.model;
    return result;
  }
  const RepoInfo info = client->repo_info(ref.repo, ref.revision);
  if (!is_commit_hash(info.commit))
    fail("the hub named no commit for {} at {} (got \"{}\")", ref.repo, ref.revision, info.commit);
  std::vector<std::string> names;
  std::map<std::string, const RepoFile*> by_path;
  for (const RepoFile& f : info.files) {
    names.push_back(f.path);
    by_path[f.path] = &f;
  }
  const FilePick pick = pick_files(ref, names);
  for (const std::string& path : pick.files) {
    if (!safe_path(path)) fail("the hub listed a file of {} whose path leaves the repository: \"{}\"", ref.repo, path);
    const RepoFile& f = *by_path.at(path);
    const std::string etag = f.etag();
    if (etag.empty() || etag.find('/') != std::string::npos || etag.find("..") != std::string::npos)
      fail("the hub gave {} of {} no usable hash (\"{}\")", path, ref.repo, etag);
    const fs::path blob = cache.blob(ref.repo, etag);
    if (options.on_file) options.on_file(path, f.size);
    std::error_code ec;
    if (!(fs::exists(blob, ec) && static_cast<std::int64_t>(fs::file_size(blob, ec)) == f.size)) {
      fs::create_directories(blob.parent_path());
      const fs::path part = cache.incomplete_blob(ref.repo, etag);
      const auto before = fs::exists(part, ec) ? static_cast<std::int64_t>(fs::file_size(part, ec)) : 0;
      client->download(ref.repo, info.commit, f, part, options.on_bytes);
      result.bytes_downloaded += f.size - std::min(before, f.size);
      if (!verified(part, f)) {
        fs::remove(part, ec);
        fail("{} of {} does not match the hub's {} after download (removed; pull again)", path, ref.repo,
             f.sha256.empty() ? "blob id" : "SHA-256");
      }
      fs::rename(part, blob);
    }
    cache.link(ref.repo, info.commit, path, etag);
  }
  cache.set_ref(ref.repo, ref.revision, info.commit);
  result.commit = info.commit;
  result.snapshot = cache.snapshot(ref.repo, info.commit);
  result.files = pick.files;
  result.model = pick.model.empty() ? result.snapshot : result.snapshot / pick.model;
  return result;
}

}  // namespace folio::hub
