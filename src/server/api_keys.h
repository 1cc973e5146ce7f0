// ApiKeys: the keys a client may present as `Authorization: Bearer KEY`.
// The scheme is read case-insensitively (RFC 9110 says it is), the key must
// match one of the server's whole, byte for byte (a key followed by a NUL and
// junk is another key), and the comparison takes a time that depends only on
// what the client sent: every key is compared, to the end of the given one.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace folio::server {

class ApiKeys {
 public:
  ApiKeys() = default;
  // Throws Error when a key is empty or holds a character a header cannot
  // carry plainly (allowed: letters, digits and - . _ ~ + / = :).
  explicit ApiKeys(std::vector<std::string> keys, const std::string& source = "--api-key");

  // Keys from the command line, a file (one per line; blank lines and lines
  // starting with # are skipped) and an environment variable's value (keys
  // separated by commas); the file and variable may be empty. Throws Error
  // naming the file and line of a bad key, or a file that cannot be read.
  static ApiKeys load(const std::vector<std::string>& flags, const std::string& file,
                      const std::optional<std::string>& env);

  bool empty() const { return keys_.empty(); }
  std::size_t size() const { return keys_.size(); }
  // Whether an Authorization field's value (nullptr: none was sent) carries one of the keys.
  bool accepts(const std::string* authorization) const;

 private:
  std::vector<std::string> keys_;
};

}  // namespace folio::server
