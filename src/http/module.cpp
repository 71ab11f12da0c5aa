#include "kwd/http/module.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "kwd/platform/host.hpp"

namespace kwd::http {
namespace {

constexpr const char* kModuleName = "kernel-watchdog-http.so";

std::vector<std::filesystem::path> candidates() {
  std::vector<std::filesystem::path> out;
  if (const char* path = std::getenv("KERNEL_WATCHDOG_HTTP_MODULE"); path && *path)
    out.emplace_back(path);
  const auto dir = platform::self_executable().parent_path();
  out.push_back(dir / kModuleName);
  out.push_back(dir.parent_path() / "lib" / "kernel-watchdog" / kModuleName);
  return out;
}

template <typename Fn>
Fn symbol(void* library, const char* name) {
  void* address = ::dlsym(library, name);
  if (address == nullptr) throw std::runtime_error(std::string("the HTTP module lacks ") + name);
  return reinterpret_cast<Fn>(address);
}

}  // namespace

Module::~Module() {
  if (library_ != nullptr) ::dlclose(library_);
}

const Module& Module::get() {
  // Loaded once. A load that fails leaves nothing behind and is tried again on the next
  // call (a few dlopen lookups).
  static const std::unique_ptr<Module> loaded = [] {
    auto m = std::make_unique<Module>();
    std::string tried;
    for (const auto& candidate : candidates()) {
      m->library_ = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (m->library_ != nullptr) break;
      tried += (tried.empty() ? "" : "; ") + std::string(::dlerror());
    }
    if (m->library_ == nullptr)
      throw std::runtime_error(std::string("the HTTP module ") + kModuleName +
                               " could not be loaded (" + tried + ")");
    m->server_start = symbol<kwd_http_server_start_fn>(m->library_, "kwd_http_server_start");
    m->server_publish = symbol<kwd_http_server_publish_fn>(m->library_, "kwd_http_server_publish");
    m->server_port = symbol<kwd_http_server_port_fn>(m->library_, "kwd_http_server_port");
    m->server_stop = symbol<kwd_http_server_stop_fn>(m->library_, "kwd_http_server_stop");
    m->get_request = symbol<kwd_http_get_fn>(m->library_, "kwd_http_get");
    m->free_body = symbol<kwd_http_free_fn>(m->library_, "kwd_http_free");
    return m;
  }();
  return *loaded;
}

Response get(const std::string& host, int port, const std::string& path,
             const std::string& authorization, int timeout_ms) {
  Response out;
  try {
    const Module& m = Module::get();
    char* body = nullptr;
    std::size_t size = 0;
    char error[256] = {};
    out.status = m.get_request(host.c_str(), port, path.c_str(),
                               authorization.empty() ? nullptr : authorization.c_str(), timeout_ms,
                               &body, &size, error, sizeof error);
    if (body != nullptr) {
      out.body.assign(body, size);
      m.free_body(body);
    }
    if (out.status < 0) out.error = error;
  } catch (const std::exception& e) {
    out.status = -1;
    out.error = e.what();
  }
  return out;
}

}  // namespace kwd::http
