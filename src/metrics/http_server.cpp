#include "kwd/metrics/http_server.hpp"

#include <charconv>
#include <stdexcept>

#include "kwd/http/module.hpp"
#include "kwd/metrics/exposition.hpp"

namespace kwd::metrics {

std::pair<std::string, int> split_address(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw std::invalid_argument("'" + address + "' is not HOST:PORT (e.g. 127.0.0.1:9464)");
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = -1;
  const char* first = address.data() + colon + 1;
  const char* last = address.data() + address.size();
  const auto [end, ec] = std::from_chars(first, last, port);
  if (ec != std::errc() || end != last || port < 0 || port > 65535)
    throw std::invalid_argument("'" + address + "': the port must be a number from 0 to 65535");
  return {host, port};
}

struct HttpServer::State {
  const http::Module* module = nullptr;
  kwd_http_server* server = nullptr;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (server != nullptr) module->server_stop(server);
  }
};

HttpServer::HttpServer(const std::string& address) : state_(std::make_unique<State>()) {
  const auto [host, port] = split_address(address);
  try {
    state_->module = &http::Module::get();
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("cannot serve metrics: ") + e.what());
  }
  char error[256] = {};
  state_->server = state_->module->server_start(host.c_str(), port, "/metrics", kContentType, error,
                                                sizeof error);
  if (state_->server == nullptr)
    throw std::runtime_error("cannot serve metrics on " + address + ": " + error);
}

HttpServer::~HttpServer() = default;

void HttpServer::publish(std::string text) {
  state_->module->server_publish(state_->server, text.data(), text.size());
}

int HttpServer::port() const {
  return state_->module->server_port(state_->server);
}

}  // namespace kwd::metrics
