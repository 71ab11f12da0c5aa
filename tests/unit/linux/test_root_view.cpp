#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "kwd/fingerprint/package_metadata.hpp"
#include "kwd/platform/root_view.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using kwd::platform::RootView;
using kwd::test::write_file;

namespace {

// A process whose root directory is `dir` (a container's, as far as /proc/PID/root goes),
// killed and reaped at the end. pid 0 when this machine will not let us chroot.
struct ChrootedProcess {
  pid_t pid = 0;    // once its root is `dir`
  pid_t child = 0;  // killed and reaped at the end, whatever came of it
  explicit ChrootedProcess(const fs::path& dir) {
    child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      if (::chroot(dir.c_str()) != 0 || ::chdir("/") != 0) ::_exit(3);
      for (;;)
        ::pause();
    }
    std::error_code ec;
    const fs::path want = fs::canonical(dir);
    const fs::path root = "/proc/" + std::to_string(child) + "/root";
    for (int i = 0; i < 500; ++i) {
      if (fs::read_symlink(root, ec) == want) {
        pid = child;
        return;
      }
      int status = 0;
      if (::waitpid(child, &status, WNOHANG) == child) {  // could not chroot
        child = 0;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void end() {
    if (child > 0) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
    }
    child = 0;
    pid = -1;
  }
  ~ChrootedProcess() { end(); }
};

}  // namespace

TEST_CASE("a process's root view resolves every path inside that root, and outlives it",
          "[platform]") {
  kwd::test::TempDir dir("kwd-root");
  write_file(dir.path / "etc/marker", "the container's");
  fs::create_symlink("/etc/marker", dir.path / "absolute-link");  // as the container means it
  REQUIRE(::mkfifo((dir.path / "fifo").c_str(), 0600) == 0);
  ChrootedProcess container(dir.path);
  if (container.pid <= 0) {
    WARN("chroot not permitted here: not checked");
    return;
  }
  const auto view = RootView::of_process("/proc", container.pid);
  REQUIRE(view);
  CHECK(view->read("/etc/marker", 100) == "the container's");
  // An absolute link and a climb above "/" both stay inside the container's root.
  CHECK(view->read("/absolute-link", 100) == "the container's");
  CHECK(view->read("/../../../etc/marker", 100) == "the container's");
  // The host's own files are not reachable through it.
  CHECK_FALSE(view->read("/etc/os-release", 100));
  REQUIRE(RootView::host().read("/etc/os-release", 100));
  // A FIFO is not opened (a read would block until a writer came).
  CHECK_FALSE(view->read("/fifo", 100));
  // read_file says why: missing (the daemon waits for a connection file not written yet),
  // not a regular file, and whose a file that was read is.
  const auto fifo = view->read_file("/fifo", 100);
  CHECK_FALSE(fifo.missing);
  CHECK(fifo.problem == "/fifo: not a regular file");
  const auto missing = view->read_file("/etc/not-yet.json", 100);
  CHECK(missing.missing);
  CHECK(missing.problem.empty());
  CHECK_FALSE(missing.text);
  const auto read = view->read_file("/etc/marker", 8);
  CHECK(read.text == "the cont");  // up to the limit
  CHECK(read.owner == ::geteuid());
  const auto marker = view->stat("/etc");
  REQUIRE(marker);
  CHECK(marker->directory);
  const auto names = view->list("/");
  CHECK(std::find(names.begin(), names.end(), "absolute-link") != names.end());

  container.end();
  // The process is gone; the root it had is still read through the view.
  CHECK(view->read("/absolute-link", 100) == "the container's");
  CHECK_FALSE(RootView::of_process("/proc", 999'999'999));
}

TEST_CASE("PackageIndex reads each kernel's own site directory, through its root",
          "[fingerprint]") {
  // Two containers with a site directory at the same path, holding different versions.
  const std::string site = "/opt/env/lib/python3.11/site-packages";
  const std::string module = site + "/podpkg/_native.cpython-311-x86_64-linux-gnu.so";
  kwd::test::TempDir a("kwd-root-a"), b("kwd-root-b");
  for (const auto& [root, version] : {std::pair{&a, "1.0"}, std::pair{&b, "2.5"}}) {
    write_file(root->path / site.substr(1) / "podpkg/_native.cpython-311-x86_64-linux-gnu.so", "");
    write_file(
        root->path / site.substr(1) / ("podpkg-" + std::string(version) + ".dist-info/METADATA"),
        "Metadata-Version: 2.1\nName: podpkg\nVersion: " + std::string(version) + "\n");
  }
  ChrootedProcess first(a.path), second(b.path);
  if (first.pid <= 0 || second.pid <= 0) {
    WARN("chroot not permitted here: not checked");
    return;
  }
  const auto in_first = RootView::of_process("/proc", first.pid);
  const auto in_second = RootView::of_process("/proc", second.pid);
  REQUIRE(in_first);
  REQUIRE(in_second);
  kwd::fingerprint::PackageIndex index;
  const auto first_owner = index.owner_of(*in_first, module);
  const auto second_owner = index.owner_of(*in_second, module);
  REQUIRE(first_owner);
  REQUIRE(second_owner);
  CHECK(first_owner->version == "1.0");
  CHECK(second_owner->version == "2.5");
  // The host has no such directory: the node's file system is not where a kernel's are.
  CHECK_FALSE(index.owner_of(module));
  // The answer stays after the process is gone (the daemon's rebuild at a death).
  first.end();
  const auto after = index.owner_of(*in_first, module);
  REQUIRE(after);
  CHECK(after->version == "1.0");
  const auto found = index.find(*in_first, module, "PodPkg");
  REQUIRE(found);
  CHECK(found->metadata_dir == fs::path(site) / "podpkg-1.0.dist-info");
}

TEST_CASE("one site directory reached by two paths answers with each path's own names",
          "[fingerprint]") {
  // A volume mounted at two places (two pods' images), here a link: same device and inode.
  kwd::test::TempDir dir("kwd-two-paths");
  const fs::path site = dir.path / "a/lib/python3/site-packages";
  write_file(site / "twopath/_native.so", "");
  write_file(site / "twopath-3.1.dist-info/METADATA", "Name: twopath\nVersion: 3.1\n");
  fs::create_directory_symlink(dir.path / "a", dir.path / "b");
  kwd::fingerprint::PackageIndex index;
  for (const char* top : {"a", "b"}) {
    const fs::path through = dir.path / top / "lib/python3/site-packages";
    const auto owner = index.owner_of((through / "twopath/_native.so").string());
    REQUIRE(owner);
    CHECK(owner->version == "3.1");
    CHECK(owner->metadata_dir == through / "twopath-3.1.dist-info");
  }
}
