#include "hub/model_ref.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hub/model_aliases_json.h"  // generated from model_aliases.json

namespace folio::hub {
namespace {

constexpr std::string_view kScheme = "hf://";
constexpr std::size_t kMaxNameBytes = 96;  // the Hub's limit for an org or repo name

// An org or repo name: letters, digits, '-', '_', '.', not starting with '-' or '.'.
bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameBytes || s.front() == '-' || s.front() == '.') return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  return s.find("..") == std::string_view::npos;
}

// A path inside a repository: no empty, "." or ".." segment, no backslash.
bool valid_file(std::string_view s) {
  if (s.empty() || s.find('\\') != std::string_view::npos || s.find('\0') != std::string_view::npos) return false;
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = s.find('/', start);
    const std::string_view part = s.substr(start, slash == std::string_view::npos ? s.size() - start : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

[[noreturn]] void malformed(std::string_view text) {
  fail(
      "\"{}\" is not a model name: write ORG/REPO, ORG/REPO:QUANT (a GGUF quant tag such as Q4_K_M), "
      "ORG/REPO/FILE, with an optional hf:// in front and @REVISION after the repository, or an alias "
      "(folio pull --list-aliases)",
      text);
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& model_aliases() {
  static const std::vector<std::pair<std::string, std::string>> table = [] {
    std::vector<std::pair<std::string, std::string>> out;
    const auto json = nlohmann::ordered_json::parse(kModelAliasesJson);
    for (const auto& [name, target] : json.at("aliases").items()) out.emplace_back(name, target.get<std::string>());
    return out;
  }();
  return table;
}

std::string ModelRef::text() const {
  std::string out = repo;
  if (revision != "main") out += "@" + revision;
  if (!quant.empty()) out += ":" + quant;
  if (!file.empty()) out += "/" + file;
  return out;
}

std::optional<ModelRef> parse_model_ref(std::string_view text) {
  const bool explicit_hub = text.starts_with(kScheme);
  std::string_view rest = explicit_hub ? text.substr(kScheme.size()) : text;
  if (!explicit_hub && rest.find('/') == std::string_view::npos) {
    for (const auto& [name, target] : model_aliases())
      if (name == rest) return parse_model_ref(target);
    return std::nullopt;  // no slash and no alias: a local name
  }
  // A local path: absolute, relative, or with a file extension in its first part.
  if (!explicit_hub &&
      (rest.starts_with("/") || rest.starts_with("./") || rest.starts_with("../") || rest.starts_with("~")))
    return std::nullopt;
  ModelRef ref;
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) malformed(text);
  const std::string_view org = rest.substr(0, slash);
  rest = rest.substr(slash + 1);
  std::size_t end = 0;
  while (end < rest.size() && rest[end] != '/' && rest[end] != ':' && rest[end] != '@') ++end;
  const std::string_view name = rest.substr(0, end);
  if (!valid_name(org) || !valid_name(name)) {
    if (explicit_hub) malformed(text);
    return std::nullopt;
  }
  ref.repo = std::string(org) + "/" + std::string(name);
  rest = rest.substr(end);
  if (rest.starts_with("@")) {
    std::size_t r = 1;
    while (r < rest.size() && rest[r] != '/' && rest[r] != ':') ++r;
    ref.revision = std::string(rest.substr(1, r - 1));
    if (ref.revision.empty() || !valid_name(ref.revision)) malformed(text);
    rest = rest.substr(r);
  }
  if (rest.starts_with(":")) {
    ref.quant = std::string(rest.substr(1));
    if (!valid_name(ref.quant)) malformed(text);
  } else if (rest.starts_with("/")) {
    ref.file = std::string(rest.substr(1));
    if (!valid_file(ref.file)) malformed(text);
  } else if (!rest.empty()) {
    malformed(text);
  }
  return ref;
}

}  // namespace folio::hub
