#pragma once

#include <array>
#include <mutex>
#include <span>

namespace kwd::platform {

// A shared library opened at its first use, not when the watchdog starts. libzmq (with the
// thirteen libraries it needs) and libcrypto cost a process 1.4 ms of dynamic loading here;
// `run` spends that before it can start the kernel, and needs neither library until the
// kernel runs. The watchdog links neither, on Linux or macOS: their functions are defined in
// src/platform/deferred_*.cpp and find the library's own through this class, under the names
// this platform gives them (libzmq_names(), libcrypto_names()).
class DeferredLibrary {
 public:
  explicit DeferredLibrary(const char* name) : one_{name}, names_(one_) {}
  // The names tried in order, the first that opens kept; they outlive the object (a static
  // array of the platform's).
  explicit DeferredLibrary(std::span<const char* const> names) : names_(names) {}
  DeferredLibrary(const DeferredLibrary&) = delete;
  DeferredLibrary& operator=(const DeferredLibrary&) = delete;

  // The library's `name`, or nullptr when the library or the symbol is missing (said once,
  // in the log, naming the library).
  void* symbol(const char* name) noexcept;
  // The same, as the function type it is declared with: function<decltype(&zmq_close)>(...).
  template <typename Fn>
  Fn function(const char* name) noexcept {
    return reinterpret_cast<Fn>(symbol(name));
  }

 private:
  std::array<const char*, 1> one_{};
  std::span<const char* const> names_;
  const char* opened_name_ = nullptr;
  std::once_flag opened_;
  void* handle_ = nullptr;
};

// Where this platform's libzmq 4 (ABI 5) and OpenSSL 3 libcrypto are looked for, in order
// (src/platform/<os>/library_names.cpp): a bare name first, which the dynamic loader's own
// search (and a copy beside the program) answers, then the places it does not look.
std::span<const char* const> libzmq_names() noexcept;
std::span<const char* const> libcrypto_names() noexcept;

}  // namespace kwd::platform
