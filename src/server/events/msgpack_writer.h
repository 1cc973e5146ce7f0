// MsgpackWriter: the few MessagePack forms KV events need (nil, bool, ints,
// float64, str, array headers), each in its shortest encoding, big-endian as
// the format says. Ours because Debian's msgpack-cxx cannot be installed
// beside libboost1.81-dev (it depends on Boost 1.74's -dev packages).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace folio::server {

class MsgpackWriter {
 public:
  void nil() { out_ += '\xc0'; }
  void boolean(bool v) { out_ += v ? '\xc3' : '\xc2'; }

  void uint(std::uint64_t v) {
    if (v < 0x80) {
      byte(static_cast<std::uint8_t>(v));  // positive fixint
    } else if (v <= 0xff) {
      byte(0xcc);
      be(v, 1);
    } else if (v <= 0xffff) {
      byte(0xcd);
      be(v, 2);
    } else if (v <= 0xffffffffull) {
      byte(0xce);
      be(v, 4);
    } else {
      byte(0xcf);
      be(v, 8);
    }
  }

  void integer(std::int64_t v) {
    if (v >= 0) return uint(static_cast<std::uint64_t>(v));
    if (v >= -32) {
      byte(static_cast<std::uint8_t>(v));  // negative fixint
    } else if (v >= INT8_MIN) {
      byte(0xd0);
      be(static_cast<std::uint64_t>(v), 1);
    } else if (v >= INT16_MIN) {
      byte(0xd1);
      be(static_cast<std::uint64_t>(v), 2);
    } else if (v >= INT32_MIN) {
      byte(0xd2);
      be(static_cast<std::uint64_t>(v), 4);
    } else {
      byte(0xd3);
      be(static_cast<std::uint64_t>(v), 8);
    }
  }

  void float64(double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    byte(0xcb);
    be(bits, 8);
  }

  void str(std::string_view s) {
    const std::size_t n = s.size();
    if (n < 32) {
      byte(static_cast<std::uint8_t>(0xa0 | n));
    } else if (n <= 0xff) {
      byte(0xd9);
      be(n, 1);
    } else if (n <= 0xffff) {
      byte(0xda);
      be(n, 2);
    } else {
      byte(0xdb);
      be(n, 4);
    }
    out_.append(s);
  }

  // The header of an array of n items; the items follow.
  void array(std::size_t n) {
    if (n < 16) {
      byte(static_cast<std::uint8_t>(0x90 | n));
    } else if (n <= 0xffff) {
      byte(0xdc);
      be(n, 2);
    } else {
      byte(0xdd);
      be(n, 4);
    }
  }

  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void byte(std::uint8_t b) { out_ += static_cast<char>(b); }
  // The low `width` bytes of v, most significant first.
  void be(std::uint64_t v, int width) {
    for (int i = width - 1; i >= 0; --i) byte(static_cast<std::uint8_t>(v >> (8 * i)));
  }

  std::string out_;
};

}  // namespace folio::server
