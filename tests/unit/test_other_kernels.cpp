// Kernels that are not IPython: a fatal signal that xeus-python's own handler turned into an
// exit, read back from its message and native stack; R found in a kernel's loaded files.
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kwd/diagnosis/caught_signal.hpp"
#include "kwd/fingerprint/r_runtime.hpp"
#include "temp_dir.hpp"

using namespace kwd;
namespace fs = std::filesystem;

namespace {

// As xeus-python 0.19 printed it for ctypes.string_at(0) on Debian 12 (addresses shortened).
constexpr std::string_view kXeusStack =
    "/v/lib/python3.11/site-packages/xpython/"
    "xpython_extension.cpython-311-x86_64-linux-gnu.so(_ZN4xpyt15sigsegv_handlerEi+0x17)"
    "[0x7f4e1cf85177]\n"
    "/lib/x86_64-linux-gnu/libc.so.6(+0x3c050)[0x7f4e1d84c050]\n"
    "/lib/x86_64-linux-gnu/libc.so.6(+0x156219)[0x7f4e1d966219]\n"
    "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so(+0xe197)"
    "[0x7f4e1d541197]\n"
    "/lib/x86_64-linux-gnu/libffi.so.8(ffi_call+0xcd)[0x7f4e1d51fb0d]\n"
    "[kernel-watchdog 04:57:01.936 warning] kernel 4458 exited with status 1\n";

}  // namespace

TEST_CASE("a backtrace_symbols line: module, demangled function, offset") {
  using diagnosis::parse_backtrace_symbol;
  auto f = parse_backtrace_symbol("/lib/libxeus.so.1(_ZN4xeus6xshell3runEv+0x449)[0x7f5700b6e259]");
  REQUIRE(f);
  CHECK(f->module == "/lib/libxeus.so.1");
  CHECK(f->function == "xeus::xshell::run()");
  CHECK(f->offset == "+0x449");
  f = parse_backtrace_symbol("/usr/bin/xpython(+0x84fd) [0x5634b39614fd]");
  REQUIRE(f);
  CHECK(f->module == "/usr/bin/xpython");
  CHECK(f->function.empty());
  CHECK(f->offset == "+0x84fd");
  // A space in the module: not a frame line (prose on stderr can end in "(...)[0x..]").
  CHECK_FALSE(parse_backtrace_symbol("/opt/x (copy)/libz.so(inflate+0x10)[0x1]"));
  // A path with parentheses of its own keeps them.
  f = parse_backtrace_symbol("/opt/x(1)/libz.so(inflate+0x10)[0x1]");
  REQUIRE(f);
  CHECK(f->module == "/opt/x(1)/libz.so");
  CHECK(f->function == "inflate");
  CHECK_FALSE(parse_backtrace_symbol("Traceback (most recent call last):"));
  CHECK_FALSE(parse_backtrace_symbol("[kernel-watchdog 04:57:01.936 warning] kernel died"));
  CHECK_FALSE(parse_backtrace_symbol("libc.so.6(+0x1)[nothex]"));
  CHECK_FALSE(parse_backtrace_symbol(""));
}

TEST_CASE("xeus-python's 'Error: signal 11:' and the stack under it") {
  const auto caught = diagnosis::parse_caught_signal("Error: signal 11:", kXeusStack);
  REQUIRE(caught);
  CHECK(caught->number == SIGSEGV);
  CHECK(caught->name == "SIGSEGV");
  // The stack ends at the first line that is not a frame.
  REQUIRE(caught->frames.size() == 5);
  CHECK(caught->frames[0].function == "xpyt::sigsegv_handler(int)");
  // Past the handler, libc (the signal trampoline, the faulting memcpy) and into ctypes.
  CHECK(diagnosis::caught_signal_culprit(*caught) ==
        "_ctypes.cpython-311-x86_64-linux-gnu.so (+0xe197)");

  const auto abort = diagnosis::parse_caught_signal("Error: signal 6:", "");
  REQUIRE(abort);
  CHECK(abort->name == "SIGABRT");
  CHECK(abort->frames.empty());
  CHECK_FALSE(diagnosis::caught_signal_culprit(*abort));
  const auto unnamed = diagnosis::parse_caught_signal("Error: signal 40:", "");
  REQUIRE(unnamed);
  CHECK(unnamed->name == "signal 40");
  CHECK_FALSE(diagnosis::parse_caught_signal("Error: signal x:", ""));
  CHECK_FALSE(diagnosis::parse_caught_signal("Error: signal 0:", ""));
  CHECK_FALSE(diagnosis::parse_caught_signal("Error: signal 99:", ""));
  CHECK_FALSE(diagnosis::parse_caught_signal("Error: signal 4294967307:", ""));
  CHECK_FALSE(diagnosis::parse_caught_signal("no signal here", ""));
}

TEST_CASE("DESCRIPTION fields and R packages' shared objects") {
  const std::string description =
      "Package: pbdZMQ\nVersion: 0.3-8\r\nTitle: Programming with\n  Big Data\nEmpty:\n";
  CHECK(fingerprint::dcf_field(description, "Package") == "pbdZMQ");
  CHECK(fingerprint::dcf_field(description, "Version") == "0.3-8");
  CHECK_FALSE(fingerprint::dcf_field(description, "Empty"));
  CHECK_FALSE(fingerprint::dcf_field(description, "Big Data"));
  CHECK_FALSE(fingerprint::dcf_field("", "Version"));
  CHECK(fingerprint::r_package_dir("/usr/lib/R/site-library/cli/libs/cli.so") ==
        "/usr/lib/R/site-library/cli");
  CHECK_FALSE(fingerprint::r_package_dir("/usr/lib/R/lib/libR.so"));
  CHECK_FALSE(fingerprint::r_package_dir("/usr/lib/x86_64-linux-gnu/libzmq.so.5"));
  CHECK_FALSE(fingerprint::r_package_dir("libs/x.so"));
}

TEST_CASE("R in a kernel's loaded files: its home, version and packages with native code") {
  const test::TempDir root("kwd-r");
  const fs::path home = root.path / "R";
  fs::create_directories(home / "lib");
  fs::create_directories(home / "library" / "base");
  fs::create_directories(home / "library" / "stats" / "libs");
  fs::create_directories(root.path / "site" / "pbdZMQ" / "libs");
  fs::create_directories(root.path / "site" / "impostor" / "libs");
  root.write("R/library/base/DESCRIPTION", "Package: base\nVersion: 4.2.2\n");
  root.write("R/library/stats/DESCRIPTION", "Package: stats\nVersion: 4.2.2\n");
  root.write("site/pbdZMQ/DESCRIPTION", "Package: pbdZMQ\nVersion: 0.3-8\n");
  root.write("site/impostor/DESCRIPTION", "Package: somethingelse\nVersion: 1\n");
  const std::string p = root.path.string();
  const std::vector<std::string> files{
      p + "/site/pbdZMQ/libs/pbdZMQ.so",    p + "/R/lib/libR.so",
      p + "/R/library/stats/libs/stats.so", p + "/site/impostor/libs/impostor.so",
      p + "/site/unread/libs/unread.so",    "/usr/lib/x86_64-linux-gnu/libzmq.so.5"};
  const auto r = fingerprint::find_r_runtime(platform::RootView::host(), files);
  REQUIRE(r);
  CHECK(r->home == home.string());
  CHECK(r->version == "4.2.2");
  REQUIRE(r->packages.size() == 3);
  CHECK(r->packages[0].name == "pbdZMQ");
  CHECK(r->packages[0].version == "0.3-8");
  CHECK(r->packages[1].name == "stats");
  // No DESCRIPTION to read: named by its directory, version unknown.
  CHECK(r->packages[2].name == "unread");
  CHECK(r->packages[2].version.empty());
  const auto j = fingerprint::to_json(*r);
  CHECK(j["packages_with_native_code"][2]["version"].is_null());
  CHECK(j["version"] == "4.2.2");

  CHECK_FALSE(fingerprint::find_r_runtime(platform::RootView::host(),
                                          {"/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"}));
}
