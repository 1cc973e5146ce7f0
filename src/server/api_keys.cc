#include "server/api_keys.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "server/http/http_message.h"

namespace folio::server {
namespace {

bool key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~' || c == '+' || c == '/' || c == '=' || c == ':';
}

void check_key(const std::string& key, const std::string& where) {
  if (key.empty()) fail("{}: an API key is empty; give at least one character", where);
  for (char c : key)
    if (!key_char(c))
      fail("{}: an API key holds the byte 0x{:02x}; keys may use letters, digits and - . _ ~ + / = : only", where,
           static_cast<unsigned char>(c));
}

// Equal, in a time that depends on given's length only.
bool same(std::string_view given, std::string_view key) {
  unsigned diff = given.size() == key.size() ? 0u : 1u;
  for (std::size_t i = 0; i < given.size(); ++i)
    diff |=
        static_cast<unsigned>(static_cast<unsigned char>(given[i]) ^ static_cast<unsigned char>(key[i % key.size()]));
  return diff == 0;
}

}  // namespace

ApiKeys::ApiKeys(std::vector<std::string> keys, const std::string& source) : keys_(std::move(keys)) {
  for (const std::string& k : keys_) check_key(k, source);
}

ApiKeys ApiKeys::load(const std::vector<std::string>& flags, const std::string& file,
                      const std::optional<std::string>& env) {
  std::vector<std::string> keys;
  for (const std::string& k : flags) {
    check_key(k, "--api-key");
    keys.push_back(k);
  }
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) fail("cannot read the API key file {}; check the path given to --api-key-file", file);
    std::string line;
    int number = 0;
    std::size_t before = keys.size();
    while (std::getline(in, line)) {
      ++number;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      check_key(line, fmt::format("{} line {}", file, number));
      keys.push_back(line);
    }
    if (keys.size() == before) fail("the API key file {} holds no key; write one key per line", file);
  }
  if (env) {
    std::size_t before = keys.size();
    std::stringstream list(*env);
    for (std::string key; std::getline(list, key, ',');) {
      if (key.empty()) continue;
      check_key(key, "FOLIO_API_KEY");
      keys.push_back(key);
    }
    if (keys.size() == before) fail("FOLIO_API_KEY is set but holds no key; unset it or give keys separated by commas");
  }
  return ApiKeys(std::move(keys));
}

bool ApiKeys::accepts(const std::string* authorization) const {
  if (keys_.empty()) return true;
  if (authorization == nullptr) return false;
  std::string_view value = *authorization;
  const std::size_t space = value.find_first_of(" \t");
  if (space == std::string_view::npos || !equals_ignore_case(value.substr(0, space), "bearer")) return false;
  std::string_view given = value.substr(space);
  while (!given.empty() && (given.front() == ' ' || given.front() == '\t')) given.remove_prefix(1);
  while (!given.empty() && (given.back() == ' ' || given.back() == '\t')) given.remove_suffix(1);
  if (given.empty()) return false;
  bool match = false;
  for (const std::string& key : keys_) match |= same(given, key);
  return match;
}

}  // namespace folio::server
