#include "kwd/platform/deferred_library.hpp"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <filesystem>
#include <string>
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

// Local: the library's symbols are found through its handle only, never bound to anyone
// else's. For a bare name, a copy beside the program first: the Python wheel carries libzmq
// and libcrypto there (cmake/wheel_install.cmake), for machines that have neither; else the
// system's.
void* open_library(const char* name) noexcept {
  if (std::strchr(name, '/') == nullptr) {
    try {
      std::error_code ec;
      const auto beside = self_executable().parent_path() / name;
      if (std::filesystem::is_regular_file(beside, ec)) {
        if (void* handle = ::dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
      }
    } catch (...) {
    }
  }
  return ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
}

// "also looked for as A, B", or nothing for a library of one name.
std::string others_tried(std::span<const char* const> names) {
  std::string others;
  for (std::size_t i = 1; i < names.size(); ++i) {
    others += i == 1 ? " (also looked for as " : ", ";
    others += names[i];
  }
  if (!others.empty()) others += ")";
  return others;
}

}  // namespace

void* DeferredLibrary::symbol(const char* name) noexcept {
  std::call_once(opened_, [this] {
    std::string first_error;  // the first name's reason is the one to give: the rest are fallbacks
    for (const char* candidate : names_) {
      handle_ = open_library(candidate);
      if (handle_ != nullptr) {
        opened_name_ = candidate;
        break;
      }
      const char* why = ::dlerror();
      try {
        if (first_error.empty()) first_error = why != nullptr ? why : "unknown error";
      } catch (...) {
      }
    }
    if (handle_ != nullptr) {
      say(spdlog::level::debug, "opened {} at its first use", opened_name_);
      return;
    }
    try {
      say(spdlog::level::err, "cannot load {}: {}{}", names_.empty() ? "?" : names_[0], first_error,
          others_tried(names_));
    } catch (...) {
    }
  });
  if (handle_ == nullptr) return nullptr;
  void* address = ::dlsym(handle_, name);
  if (address == nullptr) say(spdlog::level::err, "{} has no {}", opened_name_, name);
  return address;
}

}  // namespace kwd::platform
