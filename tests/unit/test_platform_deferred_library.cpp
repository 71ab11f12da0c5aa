#include <unistd.h>

#include <catch2/catch.hpp>
#include <span>
#include <string_view>

#include "kwd/platform/deferred_library.hpp"

using kwd::platform::DeferredLibrary;

namespace {

// The C library, under the name this platform's loader knows it by.
#ifdef __APPLE__
constexpr const char* kLibc = "/usr/lib/libSystem.B.dylib";
#else
constexpr const char* kLibc = "libc.so.6";
#endif

}  // namespace

TEST_CASE("a deferred library finds its symbols, and says no for a missing one or library") {
  DeferredLibrary libc(kLibc);
  const auto getpid_there = reinterpret_cast<pid_t (*)()>(libc.symbol("getpid"));
  REQUIRE(getpid_there != nullptr);
  CHECK(getpid_there() == ::getpid());
  CHECK(libc.symbol("no_such_function_anywhere") == nullptr);

  DeferredLibrary missing("libkernel-watchdog-missing.so.0");
  CHECK(missing.symbol("getpid") == nullptr);
  CHECK(missing.symbol("getpid") == nullptr);  // asked again: still no, and no crash
}

TEST_CASE("a deferred library of several names opens the first that is there") {
  static constexpr const char* kNames[] = {"libkernel-watchdog-missing.so.0",
                                           "/nonexistent/libkernel-watchdog.so.0", kLibc};
  DeferredLibrary library{std::span<const char* const>(kNames)};
  const auto getpid_there = reinterpret_cast<pid_t (*)()>(library.symbol("getpid"));
  REQUIRE(getpid_there != nullptr);
  CHECK(getpid_there() == ::getpid());

  static constexpr const char* kNone[] = {"libkernel-watchdog-missing.so.0",
                                          "/nonexistent/libkernel-watchdog.so.0"};
  DeferredLibrary none{std::span<const char* const>(kNone)};
  CHECK(none.symbol("getpid") == nullptr);
}

TEST_CASE("this platform names libzmq and libcrypto, a bare name first") {
  for (const auto names : {kwd::platform::libzmq_names(), kwd::platform::libcrypto_names()}) {
    REQUIRE_FALSE(names.empty());
    CHECK(std::string_view(names.front()).find('/') == std::string_view::npos);
  }
}
