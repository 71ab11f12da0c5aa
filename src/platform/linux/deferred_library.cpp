#include "kwd/platform/deferred_library.hpp"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

namespace kwd::platform {

void* DeferredLibrary::symbol(const char* name) noexcept {
  std::call_once(opened_, [this] {
    // Local: its symbols are found through this handle only, never bound to anyone else's.
    handle_ = ::dlopen(soname_, RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      try {
        spdlog::debug("opened {} at its first use", soname_);
      } catch (...) {
      }
    } else {
      const char* why = ::dlerror();
      try {
        spdlog::error("cannot load {}: {}", soname_, why != nullptr ? why : "unknown error");
      } catch (...) {  // a log that failed changes nothing here
      }
    }
  });
  if (handle_ == nullptr) return nullptr;
  void* address = ::dlsym(handle_, name);
  if (address == nullptr) {
    try {
      spdlog::error("{} has no {}", soname_, name);
    } catch (...) {
    }
  }
  return address;
}

}  // namespace kwd::platform
