#pragma once

#include <memory>
#include <string>

namespace kwd::metrics {

// Serves GET /metrics (the Prometheus text format) on HOST:PORT from one thread of its own,
// with cpp-httplib: the daemon's loop publishes a new text now and then, a scrape reads the
// last one under a lock and never waits for the loop. Any other path is 404; any other
// method 405.
class HttpServer {
 public:
  // "127.0.0.1:9464", "[::1]:9464", "localhost:9464". Throws std::runtime_error saying why
  // when the address is malformed or cannot be bound (in use, not this host's).
  explicit HttpServer(const std::string& address);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void publish(std::string text);
  [[nodiscard]] int port() const;  // the bound port (useful when 0 was asked for)

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// "HOST:PORT" split; throws std::invalid_argument naming what is wrong.
std::pair<std::string, int> split_address(const std::string& address);

}  // namespace kwd::metrics
