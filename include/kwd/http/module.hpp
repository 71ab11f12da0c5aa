#pragma once

#include <memory>
#include <string>

#include "kwd/http/module_abi.hpp"

namespace kwd::http {

// kernel-watchdog-http.so, loaded once for the process on first use: $KERNEL_WATCHDOG_HTTP_MODULE,
// else beside the executable (a build tree), else ../lib/kernel-watchdog/ (where `cmake
// --install` puts it).
class Module {
 public:
  // The process's module; throws std::runtime_error saying what could not be loaded.
  static const Module& get();

  kwd_http_server_start_fn server_start = nullptr;
  kwd_http_server_publish_fn server_publish = nullptr;
  kwd_http_server_port_fn server_port = nullptr;
  kwd_http_server_stop_fn server_stop = nullptr;
  kwd_http_get_fn get_request = nullptr;
  kwd_http_free_fn free_body = nullptr;

  Module() = default;  // empty: get() fills the one the process uses
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

 private:
  void* library_ = nullptr;
};

struct Response {
  int status = -1;  // -1: no answer (the reason in `error`)
  std::string body;
  std::string error;
};

// GET on the loop's thread, bounded by `timeout_ms` to connect and as long to read: for a
// local server that answers in milliseconds. Never throws; a module that cannot be loaded
// is an error in the response.
Response get(const std::string& host, int port, const std::string& path,
             const std::string& authorization, int timeout_ms);

}  // namespace kwd::http
