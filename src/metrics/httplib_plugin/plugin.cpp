// kernel-watchdog-metrics.so: the /metrics endpoint on Debian's cpp-httplib, behind the C
// interface of kwd/metrics/http_plugin_abi.hpp (why it is a module: see there).
#include <httplib.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kwd/metrics/http_plugin_abi.hpp"

struct kwd_metrics_http {
  httplib::Server server;
  std::mutex mutex;
  std::string text;
  int port = 0;
  std::thread thread;
};

namespace {

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

void say(char* error, std::size_t size, const std::string& why) {
  if (error == nullptr || size == 0) return;
  const std::size_t n = std::min(size - 1, why.size());
  std::memcpy(error, why.data(), n);
  error[n] = '\0';
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) kwd_metrics_http* kwd_metrics_http_start(
    const char* host, int port, char* error, std::size_t error_size) {
  try {
    auto s = std::make_unique<kwd_metrics_http>();
    // One worker is plenty for a scrape every few seconds (the default is one per core);
    // cpp-httplib owns the queue it is given.
    s->server.new_task_queue = [] { return new httplib::ThreadPool(1); };
    s->server.set_keep_alive_max_count(1);
    s->server.set_read_timeout(5, 0);
    s->server.set_write_timeout(5, 0);
    auto* state = s.get();
    s->server.Get("/metrics", [state](const httplib::Request&, httplib::Response& response) {
      const std::lock_guard lock(state->mutex);
      response.set_content(state->text, kContentType);
    });
    s->server.set_error_handler([](const httplib::Request& request, httplib::Response& response) {
      if (response.status == 404 && request.method != "GET" && request.method != "HEAD")
        response.status = 405;
      response.set_content(response.status == 404 ? "not found: the metrics are at /metrics\n"
                                                  : "only GET /metrics is served\n",
                           "text/plain; charset=utf-8");
    });
    s->port = port == 0 ? s->server.bind_to_any_port(host)
                        : (s->server.bind_to_port(host, port) ? port : -1);
    if (s->port <= 0) {
      say(error, error_size, "the address cannot be bound (in use, or not this host's)");
      return nullptr;
    }
    s->thread = std::thread([state] { state->server.listen_after_bind(); });
    return s.release();
  } catch (const std::exception& e) {
    say(error, error_size, e.what());
    return nullptr;
  }
}

__attribute__((visibility("default"))) void kwd_metrics_http_publish(kwd_metrics_http* server,
                                                                     const char* text,
                                                                     std::size_t size) {
  try {
    const std::lock_guard lock(server->mutex);
    server->text.assign(text, size);
  } catch (...) {
    // Out of memory: the scrape gets the previous text.
  }
}

__attribute__((visibility("default"))) int kwd_metrics_http_port(const kwd_metrics_http* server) {
  return server->port;
}

__attribute__((visibility("default"))) void kwd_metrics_http_stop(kwd_metrics_http* server) {
  const std::unique_ptr<kwd_metrics_http> owned(server);
  owned->server.stop();
  if (owned->thread.joinable()) owned->thread.join();
}

}  // extern "C"
