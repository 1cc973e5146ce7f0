// The web page's files (src/server/web/*.html, *.css, *.js), embedded in the
// binary at build time: embed_web_assets.cmake writes them into a generated
// web_assets.cc, so `folio serve` reads no file at run time.
#pragma once

#include <span>
#include <string_view>

namespace folio::server {

struct WebAsset {
  std::string_view name;          // "index.html", "chat.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view etag;          // a hash of the bytes, quoted
  std::string_view body;
};

// Every embedded file, sorted by name.
std::span<const WebAsset> web_assets();

}  // namespace folio::server
