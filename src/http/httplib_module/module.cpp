// kernel-watchdog-http.so: the daemon's HTTP on Debian's cpp-httplib, behind the C
// interface of kwd/http/module_abi.hpp (why it is a module: see there).
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kwd/http/module_abi.hpp"

struct kwd_http_server {
  httplib::Server server;
  std::mutex mutex;
  std::string text;
  std::string content_type;
  int port = 0;
  std::thread thread;
};

namespace {

void say(char* error, std::size_t size, const std::string& why) {
  if (error == nullptr || size == 0) return;
  const std::size_t n = std::min(size - 1, why.size());
  std::memcpy(error, why.data(), n);
  error[n] = '\0';
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) kwd_http_server* kwd_http_server_start(
    const char* host, int port, const char* path, const char* content_type, char* error,
    std::size_t error_size) {
  try {
    auto s = std::make_unique<kwd_http_server>();
    s->content_type = content_type;
    // One worker is plenty for a scrape every few seconds (the default is one per core);
    // cpp-httplib owns the queue it is given.
    s->server.new_task_queue = [] { return new httplib::ThreadPool(1); };
    s->server.set_keep_alive_max_count(1);
    s->server.set_read_timeout(5, 0);
    s->server.set_write_timeout(5, 0);
    auto* state = s.get();
    s->server.Get(path, [state](const httplib::Request&, httplib::Response& response) {
      const std::lock_guard lock(state->mutex);
      response.set_content(state->text, state->content_type.c_str());
    });
    const std::string served = path;
    s->server.set_error_handler(
        [served](const httplib::Request& request, httplib::Response& response) {
          if (response.status == 404 && request.method != "GET" && request.method != "HEAD")
            response.status = 405;
          response.set_content(response.status == 404 ? "not found: see " + served + "\n"
                                                      : "only GET " + served + " is served\n",
                               "text/plain; charset=utf-8");
        });
    s->port = port == 0 ? s->server.bind_to_any_port(host)
                        : (s->server.bind_to_port(host, port) ? port : -1);
    if (s->port <= 0) {
      say(error, error_size, "the address cannot be bound (in use, or not this host's)");
      return nullptr;
    }
    s->thread = std::thread([state] { state->server.listen_after_bind(); });
    // stop() is a no-op until the thread has begun listening: a stop right after the start
    // (SIGTERM during start-up) would otherwise leave join() waiting for ever.
    for (int i = 0; i < 2000 && !s->server.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return s.release();
  } catch (const std::exception& e) {
    say(error, error_size, e.what());
    return nullptr;
  }
}

__attribute__((visibility("default"))) void kwd_http_server_publish(kwd_http_server* server,
                                                                    const char* text,
                                                                    std::size_t size) {
  try {
    const std::lock_guard lock(server->mutex);
    server->text.assign(text, size);
  } catch (...) {
    // Out of memory: a GET gets the previous text.
  }
}

__attribute__((visibility("default"))) int kwd_http_server_port(const kwd_http_server* server) {
  return server->port;
}

__attribute__((visibility("default"))) void kwd_http_server_stop(kwd_http_server* server) {
  const std::unique_ptr<kwd_http_server> owned(server);
  owned->server.stop();
  if (owned->thread.joinable()) owned->thread.join();
}

__attribute__((visibility("default"))) int kwd_http_get(const char* host, int port,
                                                        const char* path, const char* authorization,
                                                        int timeout_ms, char** body,
                                                        std::size_t* body_size, char* error,
                                                        std::size_t error_size) {
  *body = nullptr;
  *body_size = 0;
  try {
    httplib::Client client(host, port);
    const auto seconds = static_cast<time_t>(timeout_ms / 1000);
    const auto micros = static_cast<time_t>((timeout_ms % 1000) * 1000);
    client.set_connection_timeout(seconds, micros);
    client.set_read_timeout(seconds, micros);
    client.set_write_timeout(seconds, micros);
    httplib::Headers headers;
    if (authorization != nullptr) headers.emplace("Authorization", authorization);
    const auto result = client.Get(path, headers);
    if (!result) {
      say(error, error_size, "no answer: " + httplib::to_string(result.error()));
      return -1;
    }
    const std::string& text = result->body;
    *body = static_cast<char*>(std::malloc(text.size() + 1));
    if (*body == nullptr) {
      say(error, error_size, "out of memory");
      return -1;
    }
    std::memcpy(*body, text.data(), text.size());
    (*body)[text.size()] = '\0';
    *body_size = text.size();
    return result->status;
  } catch (const std::exception& e) {
    say(error, error_size, e.what());
    return -1;
  }
}

__attribute__((visibility("default"))) void kwd_http_free(char* body) {
  std::free(body);
}

}  // extern "C"
