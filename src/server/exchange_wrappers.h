// HttpExchange wrappers the server puts between a handler and its client:
// one adds header fields to whatever is answered (CORS, the cascade's),
// one keeps a whole answer instead of sending it (the cascade reads its
// small model's answer before it decides what the client gets).
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "server/http/http_exchange.h"

namespace folio::server {

// An exchange whose answers carry more header fields (CORS).
class FieldsExchange final : public HttpExchange {
 public:
  FieldsExchange(HttpExchange& inner, HttpFields fields) : inner_(inner), fields_(std::move(fields)) {}
  void respond(HttpResponse response) override {
    response.fields.insert(response.fields.end(), fields_.begin(), fields_.end());
    inner_.respond(std::move(response));
  }
  void begin_stream(int status, const std::string& content_type, const HttpFields& fields) override {
    HttpFields all = fields;
    all.insert(all.end(), fields_.begin(), fields_.end());
    inner_.begin_stream(status, content_type, all);
  }
  bool write(std::string bytes) override { return inner_.write(std::move(bytes)); }
  void end_stream() override { inner_.end_stream(); }
  bool client_gone() const override { return inner_.client_gone(); }
  void on_gone(std::function<void()> callback) override { inner_.on_gone(std::move(callback)); }
  void release_body() override { inner_.release_body(); }
  void note(std::string text) override { inner_.note(std::move(text)); }

 private:
  HttpExchange& inner_;
  HttpFields fields_;
};

// An exchange that keeps a whole answer instead of sending it: the cascade
// reads the small model's answer before it decides what the client gets.
class CapturingExchange final : public HttpExchange {
 public:
  explicit CapturingExchange(HttpExchange& client) : client_(client) {}
  void respond(HttpResponse response) override { response_ = std::move(response); }
  void begin_stream(int status, const std::string& content_type, const HttpFields& fields) override {
    response_.status = status;
    response_.content_type = content_type;
    response_.fields = fields;
  }
  bool write(std::string bytes) override {
    response_.body += bytes;
    return !client_.client_gone();
  }
  void end_stream() override {}
  bool client_gone() const override { return client_.client_gone(); }
  void on_gone(std::function<void()> callback) override { client_.on_gone(std::move(callback)); }
  void release_body() override { client_.release_body(); }
  void note(std::string text) override { client_.note(std::move(text)); }
  HttpResponse& response() { return response_; }

 private:
  HttpExchange& client_;
  HttpResponse response_;
};

}  // namespace folio::server
