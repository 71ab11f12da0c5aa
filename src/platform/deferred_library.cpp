#include "kwd/platform/deferred_library.hpp"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "kwd/platform/host.hpp"

namespace kwd::platform {
namespace {

// Said in the log; a log that fails changes nothing here (callers are noexcept).
template <typename... Args>
void say(spdlog::level::level_enum level, fmt::format_string<Args...> format,
         Args&&... args) noexcept {
  try {
    spdlog::log(level, format, std::forward<Args>(args)...);
  } catch (...) {
  }
}

// A copy beside the program first: the Python wheel carries libzmq and libcrypto there
// (cmake/wheel_install.cmake), for machines that have neither; else the system's.
void* open_library(const char* soname) noexcept {
  try {
    std::error_code ec;
    const auto beside = self_executable().parent_path() / soname;
    if (std::filesystem::is_regular_file(beside, ec)) {
      if (void* handle = ::dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    }
  } catch (...) {
  }
  return ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
}

}  // namespace

void* DeferredLibrary::symbol(const char* name) noexcept {
  std::call_once(opened_, [this] {
    // Local: its symbols are found through this handle only, never bound to anyone else's.
    handle_ = open_library(soname_);
    if (handle_ != nullptr) {
      say(spdlog::level::debug, "opened {} at its first use", soname_);
    } else {
      const char* why = ::dlerror();
      say(spdlog::level::err, "cannot load {}: {}", soname_,
          why != nullptr ? why : "unknown error");
    }
  });
  if (handle_ == nullptr) return nullptr;
  void* address = ::dlsym(handle_, name);
  if (address == nullptr) say(spdlog::level::err, "{} has no {}", soname_, name);
  return address;
}

}  // namespace kwd::platform
