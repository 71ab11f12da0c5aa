#include <unistd.h>

#include <catch2/catch.hpp>

#include "kwd/platform/deferred_library.hpp"

using kwd::platform::DeferredLibrary;

TEST_CASE("a deferred library finds its symbols, and says no for a missing one or library") {
  DeferredLibrary libc("libc.so.6");
  const auto getpid_there = reinterpret_cast<pid_t (*)()>(libc.symbol("getpid"));
  REQUIRE(getpid_there != nullptr);
  CHECK(getpid_there() == ::getpid());
  CHECK(libc.symbol("no_such_function_anywhere") == nullptr);

  DeferredLibrary missing("libkernel-watchdog-missing.so.0");
  CHECK(missing.symbol("getpid") == nullptr);
  CHECK(missing.symbol("getpid") == nullptr);  // asked again: still no, and no crash
}
