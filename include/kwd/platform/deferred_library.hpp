#pragma once

#include <mutex>

namespace kwd::platform {

// A shared library opened at its first use, not when the watchdog starts. libzmq (with the
// thirteen libraries it needs) and libcrypto cost a process 1.4 ms of dynamic loading here;
// `run` spends that before it can start the kernel, and needs neither library until the
// kernel runs. On Linux the watchdog links neither: their functions are defined in
// src/platform/linux/deferred_*.cpp and find the library's own through this class.
class DeferredLibrary {
 public:
  explicit DeferredLibrary(const char* soname) : soname_(soname) {}
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
  const char* soname_;
  std::once_flag opened_;
  void* handle_ = nullptr;
};

}  // namespace kwd::platform
