// RequestParser: strict framing and every limit, fed whole and in pieces (a
// hostile client chooses where its bytes are cut).
#include "server/http/request_parser.h"

#include <gtest/gtest.h>

#include <string>

#include "support/parse_in_pieces.h"

namespace folio::server {
namespace {

struct Outcome {
  RequestParser::State state;
  HttpRefusal refusal;
  HttpRequest request;
  std::string rest;  // bytes left over after the request (the next one, pipelined)
};

// Feeds `bytes` `piece` bytes at a time, as a connection's buffer would hold them.
Outcome parse(const std::string& bytes, std::size_t piece = 1 << 20, HttpLimits limits = {}) {
  RequestParser p(limits);
  std::string rest = testing::parse_in_pieces(p, bytes, piece);
  Outcome out{p.state(), p.refusal(), {}, std::move(rest)};
  if (p.state() == RequestParser::State::kComplete) out.request = p.take_request();
  return out;
}

constexpr auto kComplete = RequestParser::State::kComplete;
constexpr auto kRefused = RequestParser::State::kRefused;

int refused_with(const std::string& bytes, std::size_t piece = 1 << 20, HttpLimits limits = {}) {
  Outcome o = parse(bytes, piece, limits);
  return o.state == kRefused ? o.refusal.status : 0;
}

TEST(RequestParserTest, ReadsAGetAndAPostWholeOrByteByByte) {
  const std::string get = "GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nUser-Agent: t\r\n\r\n";
  const std::string post =
      "POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n"
      "{\"prompt\": 1}";
  for (std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{1} << 20}) {
    Outcome g = parse(get, piece);
    ASSERT_EQ(g.state, kComplete) << g.refusal.message;
    EXPECT_EQ(g.request.method, "GET");
    EXPECT_EQ(g.request.path, "/v1/models");
    EXPECT_EQ(g.request.query, "x=1");
    EXPECT_EQ(g.request.version, 11);
    ASSERT_NE(g.request.field("user-agent"), nullptr);
    EXPECT_EQ(*g.request.field("USER-AGENT"), "t");
    Outcome p = parse(post, piece);
    ASSERT_EQ(p.state, kComplete) << p.refusal.message;
    EXPECT_EQ(p.request.body, "{\"prompt\": 1}");
  }
}

TEST(RequestParserTest, ChunkedBodyIsDecodedAndThePipelinedRequestLeftAlone) {
  const std::string next = "GET /health HTTP/1.1\r\nHost: a\r\n\r\n";
  const std::string req =
      "POST /tokenize HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4\r\n{\"a\"\r\n3;ext=1\r\n: 1\r\n1\r\n}\r\n0\r\n\r\n" +
      next;
  for (std::size_t piece : {std::size_t{1}, std::size_t{5}, std::size_t{1} << 20}) {
    Outcome o = parse(req, piece);
    ASSERT_EQ(o.state, kComplete) << o.refusal.message;
    EXPECT_EQ(o.request.body, "{\"a\": 1}");
    EXPECT_EQ(o.rest, next);
  }
}

TEST(RequestParserTest, SmugglingFramesAreRefused) {
  // Content-Length with Transfer-Encoding, in either order.
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"), 400);
  // Content-Lengths that differ, in two fields or in one list.
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}x"), 400);
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2, 3\r\n\r\n{}x"), 400);
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -2\r\n\r\n{}"), 400);
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n{}"), 400);
  // The same length twice says nothing new.
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}").state, kComplete);
  // Transfer codings: unknown alone (length unknowable), unknown before chunked, chunked twice, HTTP/1.0.
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501);
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n"),
            400);
  // Bare LF, obsolete line folding, a space before the colon.
  EXPECT_EQ(refused_with("GET / HTTP/1.1\nHost: a\n\n"), 400);
  EXPECT_EQ(refused_with("GET / HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 0\r\n\r\n"), 400);
}

TEST(RequestParserTest, BodiesAreBoundedBeforeTheyAreRead) {
  HttpLimits limits;
  limits.max_body_bytes = 10;
  // Refused on the header alone: the declared bytes need not be sent.
  Outcome o = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n", 1 << 20, limits);
  EXPECT_EQ(o.state, kRefused);
  EXPECT_EQ(o.refusal.status, 413);
  EXPECT_NE(o.refusal.message.find("--max-body-bytes"), std::string::npos) << o.refusal.message;
  // Chunked bodies count their decoded bytes, refused at the chunk that passes the limit.
  EXPECT_EQ(
      refused_with("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n6\r\naaaaaa\r\n5\r\n", 1, limits),
      413);
  EXPECT_EQ(
      parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n6\r\naaaaaa\r\n4\r\naaaa\r\n0\r\n\r\n", 3,
            limits)
          .state,
      kComplete);
  // A method with a body but no length.
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\n\r\n{}"), 411);
  // Compressed bodies are refused rather than inflated.
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}"), 415);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Encoding: identity\r\nContent-Length: 2\r\n\r\n{}").state,
            kComplete);
}

TEST(RequestParserTest, HeaderLimitsHoldHoweverTheBytesAreCut) {
  HttpLimits limits;
  limits.max_header_bytes = 1024;
  limits.max_line_bytes = 256;
  limits.max_header_fields = 20;
  std::string many = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (int i = 0; i < 21; ++i) many += "X-A: b\r\n";
  many += "\r\n";
  std::string big = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (int i = 0; i < 8; ++i) big += "X-" + std::to_string(i) + ": " + std::string(200, 'v') + "\r\n";
  big += "\r\n";
  const std::string long_line = "GET / HTTP/1.1\r\nHost: a\r\nX-Long: " + std::string(300, 'v') + "\r\n\r\n";
  const std::string long_target = "GET /" + std::string(300, 'p') + " HTTP/1.1\r\nHost: a\r\n\r\n";
  for (std::size_t piece : {std::size_t{1}, std::size_t{9}, std::size_t{100}, std::size_t{1} << 20}) {
    EXPECT_EQ(refused_with(many, piece, limits), 431) << piece;
    EXPECT_EQ(refused_with(big, piece, limits), 431) << piece;
    EXPECT_EQ(refused_with(long_line, piece, limits), 431) << piece;
    EXPECT_EQ(refused_with(long_target, piece, limits), 414) << piece;
  }
}

TEST(RequestParserTest, ABufferFullOfOneLineIsRefused) {
  RequestParser p({});
  EXPECT_EQ(p.feed("GET /" + std::string(100, 'a')), 0u);
  p.buffer_full();
  EXPECT_EQ(p.state(), kRefused);
  EXPECT_EQ(p.refusal().status, 414);
  RequestParser q({});
  q.feed("GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(100, 'a'));
  q.buffer_full();
  EXPECT_EQ(q.refusal().status, 431);
}

TEST(RequestParserTest, TargetsAndFieldsWithControlCharactersAreRefused) {
  EXPECT_EQ(refused_with("GET /a%0d%0aX:%20y HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("GET /a%00b HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("GET /a%2 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(refused_with(std::string("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\0junk\r\n\r\n", 56)), 400);
  EXPECT_EQ(refused_with("GET / HTTP/1.1\r\nHost: a\r\nX: a\x01\r\n\r\n"), 400);
  Outcome o = parse("GET /v1/models/a%2Fb HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(o.state, kComplete);
  EXPECT_EQ(o.request.path, "/v1/models/a/b");
  EXPECT_EQ(o.request.target, "/v1/models/a%2Fb");
  // The absolute form names the same path.
  Outcome a = parse("GET http://example.com/health HTTP/1.1\r\nHost: example.com\r\n\r\n");
  ASSERT_EQ(a.state, kComplete);
  EXPECT_EQ(a.request.path, "/health");
}

TEST(RequestParserTest, VersionsHostAndExpect) {
  EXPECT_EQ(refused_with("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505);
  EXPECT_EQ(refused_with("GET / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
  EXPECT_EQ(parse("GET / HTTP/1.0\r\n\r\n").state, kComplete);
  EXPECT_EQ(refused_with("GET / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n"), 417);
  EXPECT_EQ(refused_with("GARBAGE\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("GET nopath HTTP/1.1\r\nHost: a\r\n\r\n"), 400);

  RequestParser p({});
  p.feed("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  ASSERT_EQ(p.state(), RequestParser::State::kHeaderDone);
  EXPECT_TRUE(p.expects_continue());
  EXPECT_EQ(p.content_length(), 2u);
  EXPECT_TRUE(p.keep_alive());
  p.resume_body();
  EXPECT_EQ(p.feed("{}"), 2u);
  EXPECT_EQ(p.state(), kComplete);
}

TEST(RequestParserTest, KeepAliveFollowsTheVersionAndConnectionField) {
  auto keep = [](const std::string& head) {
    RequestParser p({});
    p.feed(head);
    return p.keep_alive();
  };
  EXPECT_TRUE(keep("GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_FALSE(keep("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"));
  EXPECT_FALSE(keep("GET / HTTP/1.0\r\n\r\n"));
  EXPECT_TRUE(keep("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
}

TEST(RequestParserTest, ACutShortRequestIsRefusedACleanCloseIsNot) {
  RequestParser p({});
  p.end_of_input();
  EXPECT_EQ(p.state(), RequestParser::State::kNeedMore);
  EXPECT_FALSE(p.got_some());
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n{}"), 400);
}

}  // namespace
}  // namespace folio::server
