#include "kwd/metrics/http_server.hpp"

#include <dlfcn.h>

#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "kwd/metrics/http_plugin_abi.hpp"
#include "kwd/platform/host.hpp"

namespace kwd::metrics {
namespace {

constexpr const char* kPluginName = "kernel-watchdog-metrics.so";

// Beside the executable (a build tree), then where `cmake --install` puts it; an explicit
// $KERNEL_WATCHDOG_METRICS_PLUGIN first.
std::vector<std::filesystem::path> plugin_candidates() {
  std::vector<std::filesystem::path> out;
  if (const char* path = std::getenv("KERNEL_WATCHDOG_METRICS_PLUGIN"); path && *path)
    out.emplace_back(path);
  const auto dir = platform::self_executable().parent_path();
  out.push_back(dir / kPluginName);
  out.push_back(dir.parent_path() / "lib" / "kernel-watchdog" / kPluginName);
  return out;
}

template <typename Fn>
Fn symbol(void* library, const char* name) {
  void* address = ::dlsym(library, name);
  if (address == nullptr) throw std::runtime_error(std::string("the metrics module lacks ") + name);
  return reinterpret_cast<Fn>(address);
}

}  // namespace

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
  void* library = nullptr;
  kwd_metrics_http* server = nullptr;
  kwd_metrics_http_publish_fn publish = nullptr;
  kwd_metrics_http_port_fn port = nullptr;
  kwd_metrics_http_stop_fn stop = nullptr;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (server != nullptr) stop(server);
    if (library != nullptr) ::dlclose(library);
  }
};

HttpServer::HttpServer(const std::string& address) : state_(std::make_unique<State>()) {
  const auto [host, port] = split_address(address);
  std::string tried;
  for (const auto& candidate : plugin_candidates()) {
    state_->library = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (state_->library != nullptr) break;
    tried += (tried.empty() ? "" : "; ") + std::string(::dlerror());
  }
  if (state_->library == nullptr)
    throw std::runtime_error("cannot serve metrics: the HTTP module " + std::string(kPluginName) +
                             " could not be loaded (" + tried + ")");
  const auto start = symbol<kwd_metrics_http_start_fn>(state_->library, "kwd_metrics_http_start");
  state_->publish =
      symbol<kwd_metrics_http_publish_fn>(state_->library, "kwd_metrics_http_publish");
  state_->port = symbol<kwd_metrics_http_port_fn>(state_->library, "kwd_metrics_http_port");
  state_->stop = symbol<kwd_metrics_http_stop_fn>(state_->library, "kwd_metrics_http_stop");
  char error[256] = {};
  state_->server = start(host.c_str(), port, error, sizeof error);
  if (state_->server == nullptr)
    throw std::runtime_error("cannot serve metrics on " + address + ": " + error);
}

HttpServer::~HttpServer() = default;

void HttpServer::publish(std::string text) {
  state_->publish(state_->server, text.data(), text.size());
}

int HttpServer::port() const {
  return state_->port(state_->server);
}

}  // namespace kwd::metrics
