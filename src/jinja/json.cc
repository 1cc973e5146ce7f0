// JSON <-> Value, with json.dumps's exact output (separators, indent, escapes, floats).
#include "jinja/json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/utf8.h"
#include "jinja/error.h"
#include "jinja/string.h"

namespace folio::jinja {

namespace {

void append_u_escape(std::string& out, unsigned unit) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", unit);
  out += buf;
}

void encode_string(std::string& out, const std::string& text, bool ensure_ascii) {
  out += '"';
  for (char32_t c : utf8::decode(text)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        append_u_escape(out, 0xD800 | ((v >> 10) & 0x3FF));
        append_u_escape(out, 0xDC00 | (v & 0x3FF));
      } else {
        append_u_escape(out, static_cast<unsigned>(c));
      }
    } else {
      utf8::append(out, c);
    }
  }
  out += '"';
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return py_float_repr(d);
}

[[noreturn]] void not_serializable(const Value& v) {
  runtime_fail("Object of type " + v.type_name() + " is not JSON serializable");
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonDumpOptions& options) : options_(options) {
    item_separator_ = options.item_separator.value_or(options.indent ? "," : ", ");
  }

  void write(const Value& v, int level) {
    using K = Value::Kind;
    switch (v.kind()) {
      case K::kNone: out_ += "null"; return;
      case K::kBool: out_ += v.as_bool() ? "true" : "false"; return;
      case K::kInt: out_ += std::to_string(v.as_int()); return;
      case K::kFloat: out_ += float_json(v.as_double()); return;
      case K::kString: encode_string(out_, v.as_string(), options_.ensure_ascii); return;
      case K::kSequence:
        if (v.seq().kind != SeqKind::kList && v.seq().kind != SeqKind::kTuple) not_serializable(v);
        write_list(v.seq().items, level);
        return;
      case K::kMapping: write_dict(v.map(), level); return;
      default: not_serializable(v);
    }
  }

  std::string take() { return std::move(out_); }

 private:
  // Opens a container; returns the separator between its items.
  std::string open(char bracket, int level) {
    out_ += bracket;
    if (!options_.indent) return item_separator_;
    std::string newline_indent = fmt::format("\n{}", repeat(*options_.indent, level + 1));
    out_ += newline_indent;
    return item_separator_ + newline_indent;
  }

  void close(char bracket, int level) {
    if (options_.indent) {
      out_ += '\n';
      out_ += repeat(*options_.indent, level);
    }
    out_ += bracket;
  }

  static std::string repeat(const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  }

  void write_list(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    std::string separator = open('[', level);
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += separator;
      write(items[i], level + 1);
    }
    close(']', level);
  }

  static std::string key_text(const Value& key) {
    using K = Value::Kind;
    switch (key.kind()) {
      case K::kString: return key.as_string();
      case K::kFloat: return float_json(key.as_double());
      case K::kBool: return key.as_bool() ? "true" : "false";
      case K::kInt: return std::to_string(key.as_int());
      case K::kNone: return "null";
      default:
        runtime_fail("keys must be str, int, float, bool or None, not " + key.type_name());
    }
  }

  void write_dict(const Mapping& map, int level) {
    if (map.entries.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& entry : map.entries) entries.push_back(&entry);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
        return py_compare(a->first, b->first, "<");
      });
    }
    std::string separator = open('{', level);
    bool first = true;
    for (const auto* entry : entries) {
      if (!first) out_ += separator;
      first = false;
      encode_string(out_, key_text(entry->first), options_.ensure_ascii);
      out_ += options_.key_separator;
      write(entry->second, level + 1);
    }
    close('}', level);
  }

  const JsonDumpOptions& options_;
  std::string item_separator_;
  std::string out_;
};

}  // namespace

Value value_from_json(const nlohmann::ordered_json& json) {
  using T = nlohmann::ordered_json::value_t;
  switch (json.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(json.get<bool>());
    case T::number_integer: return Value::integer(json.get<std::int64_t>());
    case T::number_unsigned: {
      auto u = json.get<std::uint64_t>();
      if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return Value::integer(static_cast<std::int64_t>(u));
      }
      return Value::number(static_cast<double>(u));
    }
    case T::number_float: return Value::number(json.get<double>());
    case T::string: return Value::string(json.get<std::string>());
    case T::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(value_from_json(item));
      return Value::sequence(std::move(items));
    }
    case T::object: {
      auto map = std::make_shared<Mapping>();
      map->entries.reserve(json.size());
      for (const auto& [key, item] : json.items()) {
        map->entries.emplace_back(Value::string(key), value_from_json(item));
      }
      return Value::mapping(std::move(map));
    }
    default: return Value();
  }
}

std::string dump_json(const Value& value, const JsonDumpOptions& options) {
  JsonWriter writer(options);
  writer.write(value, 0);
  return writer.take();
}

}  // namespace folio::jinja
