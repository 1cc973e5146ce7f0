// Python str semantics over UTF-8: the code-point view, whitespace, case and repr.
#include "jinja/string.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/utf8.h"
#include "jinja/error.h"

namespace folio::jinja {

namespace {

// Simple one-to-one case mappings of the blocks listed in the header.
char32_t upper_of(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 0x20;
  if (c < 0x80) return c;
  if (c == 0xB5) return 0x39C;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) {
    return (c & 1) ? c - 1 : c;
  }
  if (c == 0x131) return 'I';
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c : c - 1;
  if (c == 0x17F) return 'S';
  if (c >= 0x1C4 && c <= 0x1CC) return c - (c - 0x1C4) % 3;  // DŽ Dž dž, LJ Lj lj, NJ Nj nj
  if (c >= 0x1F1 && c <= 0x1F3) return 0x1F1;
  if (c >= 0x1CD && c <= 0x1DC) return (c & 1) ? c : c - 1;
  if ((c >= 0x1DE && c <= 0x1EF) || (c >= 0x1F8 && c <= 0x21F) || (c >= 0x222 && c <= 0x233)) {
    return (c & 1) ? c - 1 : c;
  }
  if (c >= 0x3B1 && c <= 0x3CB) return c == 0x3C2 ? 0x3A3 : c - 0x20;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 0x25;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 0x3F;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 0x20;
  return c;
}

char32_t lower_of(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 0x20;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) {
    return (c & 1) ? c : c + 1;
  }
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c + 1 : c;
  if (c >= 0x1C4 && c <= 0x1CC) return c - (c - 0x1C4) % 3 + 2;
  if (c >= 0x1F1 && c <= 0x1F3) return 0x1F3;
  if (c >= 0x1CD && c <= 0x1DC) return (c & 1) ? c + 1 : c;
  if ((c >= 0x1DE && c <= 0x1EF) || (c >= 0x1F8 && c <= 0x21F) || (c >= 0x222 && c <= 0x233)) {
    return (c & 1) ? c : c + 1;
  }
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 0x20;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 0x25;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 0x3F;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 0x20;
  return c;
}

// Lowercase letters without a single upper-case partner in the tables.
bool is_lower_only(char32_t c) { return c == 0xDF || c == 0x138 || c == 0x149; }
// Title-case digraphs (Dž, Lj, Nj, Dz): cased, but neither upper nor lower.
bool is_title_cp(char32_t c) { return c == 0x1C5 || c == 0x1C8 || c == 0x1CB || c == 0x1F2; }

bool is_lower_cp(char32_t c) { return !is_title_cp(c) && (upper_of(c) != c || is_lower_only(c)); }
bool is_upper_cp(char32_t c) { return !is_title_cp(c) && (lower_of(c) != c || c == 0x130); }
bool is_cased(char32_t c) { return is_title_cp(c) || is_lower_cp(c) || is_upper_cp(c); }

// The title-case form of the digraphs; other letters title-case as upper.
char32_t title_of(char32_t c) {
  if (c >= 0x1C4 && c <= 0x1CC) return c - (c - 0x1C4) % 3 + 1;
  if (c >= 0x1F1 && c <= 0x1F3) return 0x1F2;
  return 0;
}

// Full (possibly multi-character) mappings, as CPython applies them.
void append_upper(std::string& out, char32_t c) {
  if (c == 0xDF) {
    out += "SS";
  } else if (c == 0x149) {
    utf8::append(out, 0x2BC);
    out += 'N';
  } else {
    utf8::append(out, upper_of(c));
  }
}

void append_lower(std::string& out, char32_t c) {
  if (c == 0x130) {
    out += 'i';
    utf8::append(out, 0x307);
  } else {
    utf8::append(out, lower_of(c));
  }
}

void append_title(std::string& out, char32_t c) {
  if (char32_t t = title_of(c)) {
    utf8::append(out, t);
  } else if (c == 0xDF) {
    out += "Ss";
  } else {
    append_upper(out, c);
  }
}

bool is_decimal_cp(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 0x660 && c <= 0x669) || (c >= 0x6F0 && c <= 0x6F9) ||
         (c >= 0x966 && c <= 0x96F) || (c >= 0xFF10 && c <= 0xFF19);
}

bool is_digit_cp(char32_t c) { return is_decimal_cp(c) || c == 0xB2 || c == 0xB3 || c == 0xB9; }

bool is_alpha_cp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (is_cased(c)) return true;
  return c == 0xAA || c == 0xBA || (c >= 0xC0 && c <= 0x24F && c != 0xD7 && c != 0xF7) ||
         (c >= 0x370 && c <= 0x3FF && c != 0x375 && c != 0x37E && c != 0x384 && c != 0x385 &&
          c != 0x387) ||
         (c >= 0x400 && c <= 0x481) || (c >= 0x48A && c <= 0x52F) || (c >= 0x531 && c <= 0x587) ||
         (c >= 0x5D0 && c <= 0x5EA) || (c >= 0x620 && c <= 0x64A) || (c >= 0x904 && c <= 0x939) ||
         (c >= 0x3041 && c <= 0x3096) || (c >= 0x30A1 && c <= 0x30FA) ||
         (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||
         (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0x20000 && c <= 0x2FFFF);
}

// str.isprintable() of one code point, for repr(): controls, separators other
// than the space, format characters, surrogates and private use are not.
bool is_printable_cp(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E ||
      c == 0x1680) {
    return false;
  }
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) || c == 0x3000) {
    return false;
  }
  if ((c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) ||
      c == 0xFFFE || c == 0xFFFF) {
    return false;
  }
  if (c == 0x110BD || (c >= 0x1D173 && c <= 0x1D17A) || c == 0xE0001 ||
      (c >= 0xE0020 && c <= 0xE007F) || c >= 0xF0000) {
    return false;
  }
  return true;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
         c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
}

template <typename Pred>
bool all_cased_pred(std::string_view text, Pred pred) {
  if (text.empty()) return false;
  for (std::size_t i = 0; i < text.size();) {
    if (!pred(utf8::decode_lenient(text, i))) return false;
  }
  return true;
}

}  // namespace

std::string py_strip(std::string_view text, const std::optional<std::string>& chars, bool left,
                     bool right) {
  std::u32string strip_set;
  if (chars) strip_set = utf8::decode(*chars);
  auto strips = [&](char32_t c) {
    return chars ? strip_set.find(c) != std::u32string::npos : utf8::is_python_space(c);
  };
  std::u32string cps = utf8::decode(text);
  std::size_t begin = 0, end = cps.size();
  if (left) {
    while (begin < end && strips(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strips(cps[end - 1])) --end;
  }
  return utf8::encode(std::u32string_view(cps).substr(begin, end - begin));
}

std::vector<std::string> py_split(std::string_view text, const std::optional<std::string>& sep,
                                  std::int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    if (sep->empty()) runtime_fail("empty separator passed to split(); give a non-empty one");
    if (!from_right) {
      std::size_t pos = 0;
      while (maxsplit < 0 || static_cast<std::int64_t>(parts.size()) < maxsplit) {
        std::size_t hit = text.find(*sep, pos);
        if (hit == std::string_view::npos) break;
        parts.emplace_back(text.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      parts.emplace_back(text.substr(pos));
    } else {
      std::size_t end = text.size();
      while (maxsplit < 0 || static_cast<std::int64_t>(parts.size()) < maxsplit) {
        if (end < sep->size()) break;
        std::size_t hit = text.rfind(*sep, end - sep->size());
        if (hit == std::string_view::npos) break;
        parts.emplace_back(text.substr(hit + sep->size(), end - hit - sep->size()));
        end = hit;
      }
      parts.emplace_back(text.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
    return parts;
  }
  std::u32string cps = utf8::decode(text);
  const std::int64_t n = static_cast<std::int64_t>(cps.size());
  if (!from_right) {
    std::int64_t i = 0;
    while (true) {
      while (i < n && utf8::is_python_space(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) >= maxsplit) {
        parts.push_back(utf8::encode(std::u32string_view(cps).substr(i)));  // trailing space stays
        break;
      }
      std::int64_t j = i;
      while (j < n && !utf8::is_python_space(cps[j])) ++j;
      parts.push_back(utf8::encode(std::u32string_view(cps).substr(i, j - i)));
      i = j;
    }
  } else {
    std::int64_t i = n;
    while (true) {
      while (i > 0 && utf8::is_python_space(cps[i - 1])) --i;
      if (i <= 0) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) >= maxsplit) {
        parts.push_back(utf8::encode(std::u32string_view(cps).substr(0, i)));  // leading space stays
        break;
      }
      std::int64_t j = i;
      while (j > 0 && !utf8::is_python_space(cps[j - 1])) --j;
      parts.push_back(utf8::encode(std::u32string_view(cps).substr(j, i - j)));
      i = j;
    }
    std::reverse(parts.begin(), parts.end());
  }
  return parts;
}

std::vector<std::string> py_splitlines(std::string_view text, bool keepends) {
  std::vector<std::string> lines;
  std::u32string cps = utf8::decode(text);
  std::size_t start = 0, i = 0;
  while (i < cps.size()) {
    if (!is_line_break(cps[i])) {
      ++i;
      continue;
    }
    std::size_t eol = i;
    i += (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ? 2 : 1;
    lines.push_back(utf8::encode(std::u32string_view(cps).substr(start, (keepends ? i : eol) - start)));
    start = i;
  }
  if (start < cps.size()) lines.push_back(utf8::encode(std::u32string_view(cps).substr(start)));
  return lines;
}

std::string py_replace(std::string_view text, std::string_view old_text, std::string_view new_text,
                       std::int64_t count) {
  std::string out;
  std::int64_t done = 0;
  if (old_text.empty()) {
    // Python inserts `new` before every code point and at the end.
    std::size_t i = 0;
    while (i <= text.size()) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      if (i == text.size()) break;
      std::size_t start = i;
      utf8::decode_lenient(text, i);
      out += text.substr(start, i - start);
    }
    return out;
  }
  std::size_t pos = 0;
  while (count < 0 || done < count) {
    std::size_t hit = text.find(old_text, pos);
    if (hit == std::string_view::npos) break;
    out += text.substr(pos, hit - pos);
    out += new_text;
    pos = hit + old_text.size();
    ++done;
  }
  out += text.substr(pos);
  return out;
}

std::int64_t py_count(std::string_view text, std::string_view sub) {
  if (sub.empty()) return static_cast<std::int64_t>(utf8::length(text)) + 1;
  std::int64_t n = 0;
  for (std::size_t pos = text.find(sub); pos != std::string_view::npos;
       pos = text.find(sub, pos + sub.size())) {
    ++n;
  }
  return n;
}

std::int64_t py_find(std::string_view text, std::string_view sub, bool from_right) {
  std::size_t hit = from_right ? text.rfind(sub) : text.find(sub);
  if (hit == std::string_view::npos) return -1;
  return static_cast<std::int64_t>(utf8::length(text.substr(0, hit)));
}

std::string py_upper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) append_upper(out, utf8::decode_lenient(text, i));
  return out;
}

std::string py_lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) append_lower(out, utf8::decode_lenient(text, i));
  return out;
}

std::string py_capitalize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    bool first = i == 0;
    char32_t c = utf8::decode_lenient(text, i);
    if (first) {
      append_title(out, c);
    } else {
      append_lower(out, c);
    }
  }
  return out;
}

std::string py_title(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool previous_is_cased = false;
  for (std::size_t i = 0; i < text.size();) {
    char32_t c = utf8::decode_lenient(text, i);
    if (previous_is_cased) {
      append_lower(out, c);
    } else {
      append_title(out, c);
    }
    previous_is_cased = is_cased(c);
  }
  return out;
}

std::string jinja_title(std::string_view text) {
  // jinja2 splits at runs of [-\s({\[<] and capitalizes each piece:
  // its first character upper-cased, the rest lower-cased.
  auto is_separator = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || utf8::is_python_space(c);
  };
  std::string out;
  out.reserve(text.size());
  std::u32string cps = utf8::decode(text);
  std::size_t i = 0;
  while (i < cps.size()) {
    std::size_t j = i;
    bool separator = is_separator(cps[i]);
    while (j < cps.size() && is_separator(cps[j]) == separator) ++j;
    for (std::size_t k = i; k < j; ++k) {
      if (k == i) {
        append_upper(out, cps[k]);
      } else {
        append_lower(out, cps[k]);
      }
    }
    i = j;
  }
  return out;
}

bool py_islower(std::string_view text) {
  bool any_cased = false;
  for (std::size_t i = 0; i < text.size();) {
    char32_t c = utf8::decode_lenient(text, i);
    if (is_upper_cp(c)) return false;
    any_cased = any_cased || is_lower_cp(c);
  }
  return any_cased;
}

bool py_isupper(std::string_view text) {
  bool any_cased = false;
  for (std::size_t i = 0; i < text.size();) {
    char32_t c = utf8::decode_lenient(text, i);
    if (is_lower_cp(c)) return false;
    any_cased = any_cased || is_upper_cp(c);
  }
  return any_cased;
}

bool py_isdigit(std::string_view text) { return all_cased_pred(text, is_digit_cp); }
bool py_isalpha(std::string_view text) { return all_cased_pred(text, is_alpha_cp); }
bool py_isalnum(std::string_view text) {
  return all_cased_pred(text, [](char32_t c) { return is_alpha_cp(c) || is_digit_cp(c); });
}
bool py_isspace_str(std::string_view text) { return all_cased_pred(text, utf8::is_python_space); }
bool py_is_word_char(char32_t c) { return c == '_' || is_alpha_cp(c) || is_digit_cp(c); }

std::string py_repr(std::string_view text) {
  bool has_single = text.find('\'') != std::string_view::npos;
  bool has_double = text.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (std::size_t i = 0; i < text.size();) {
    char32_t c = utf8::decode_lenient(text, i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (!is_printable_cp(c)) {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      utf8::append(out, c);
    }
  }
  out += quote;
  return out;
}

std::string py_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string_view sci(buf, result.ptr - buf);  // [-]d[.ddd]e[+-]xx, shortest round trip
  std::string sign;
  if (sci.front() == '-') {
    sign = "-";
    sci.remove_prefix(1);
  }
  std::size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits += c;
  }
  int exponent = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+'), sci.data() + sci.size(), exponent);
  // CPython: the digits are 0.d1d2... x 10^decpt; exponent form outside (-4, 16].
  int decpt = exponent + 1;
  const int num_digits = static_cast<int>(digits.size());
  std::string out = sign;
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (num_digits > 1) out += "." + digits.substr(1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp_buf;
  } else if (decpt <= 0) {
    out += "0." + std::string(-decpt, '0') + digits;
  } else if (decpt >= num_digits) {
    out += digits + std::string(decpt - num_digits, '0') + ".0";
  } else {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return out;
}

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace folio::jinja
