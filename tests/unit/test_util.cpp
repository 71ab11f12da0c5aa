#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "kwd/util/byte_ring.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/process_exists.hpp"
#include "kwd/util/size_parse.hpp"

namespace fs = std::filesystem;
using namespace kwd::util;

TEST_CASE("ByteRing keeps the newest bytes, oldest first") {
  ByteRing ring(8);
  ring.append("abc");
  CHECK(ring.contents() == "abc");
  ring.append("defgh");
  CHECK(ring.contents() == "abcdefgh");
  ring.append("ij");
  CHECK(ring.contents() == "cdefghij");
  CHECK(ring.total_bytes() == 10);
  ring.append("0123456789xyz");
  CHECK(ring.contents() == "56789xyz");
  CHECK(ring.size() == 8);
}

TEST_CASE("parse_size understands the sizes people type") {
  CHECK(parse_size("4096") == 4096u);
  CHECK(parse_size("256K") == 256u * 1024);
  CHECK(parse_size("300M") == 300u * 1024 * 1024);
  CHECK(parse_size("300MiB") == 300u * 1024 * 1024);
  CHECK(parse_size("1.5G") == static_cast<std::uint64_t>(1.5 * 1024 * 1024 * 1024));
  CHECK(parse_size("2gb") == 2ull * 1024 * 1024 * 1024);
  CHECK_FALSE(parse_size(""));
  CHECK_FALSE(parse_size("lots"));
  CHECK_FALSE(parse_size("-1M"));
  CHECK_FALSE(parse_size("10X"));
  CHECK(format_bytes(3.0 * 1024 * 1024 * 1024) == "3.0 GiB");
  CHECK(format_bytes(512) == "512 B");
}

namespace {
fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("kwd-unit-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  return dir;
}
}  // namespace

TEST_CASE("ensure_private_dir creates 0700 directories and refuses non-directories") {
  const auto base = fresh_dir("private");
  ensure_private_dir(base / "a" / "b");
  struct stat st {};
  REQUIRE(::stat((base / "a" / "b").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  std::ofstream(base / "file") << "x";
  CHECK_THROWS_AS(ensure_private_dir(base / "file"), FileError);
  CHECK_THROWS_AS(ensure_private_dir(base / "file" / "sub"), FileError);
  fs::remove_all(base);
}

TEST_CASE("write_file_atomically leaves a complete 0600 file and no temporaries") {
  const auto dir = fresh_dir("atomic");
  ensure_private_dir(dir);
  const auto path = write_file_atomically(dir, "r.json", "{\"ok\": true}");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == "{\"ok\": true}");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 1);
  CHECK_THROWS_AS(write_file_atomically(dir / "missing", "r.json", "x"), FileError);
  fs::remove_all(dir);
}

TEST_CASE("sweep_temporaries removes only what dead writers left") {
  const auto dir = fresh_dir("sweep");
  ensure_private_dir(dir);
  std::ofstream(dir / ".tmp-999999999-abc") << "half";
  std::ofstream(dir / (".tmp-" + std::to_string(::getpid()) + "-abc")) << "in progress";
  std::ofstream(dir / "kept.json") << "{}";
  CHECK(sweep_temporaries(dir) == 1);
  CHECK_FALSE(fs::exists(dir / ".tmp-999999999-abc"));
  CHECK(fs::exists(dir / (".tmp-" + std::to_string(::getpid()) + "-abc")));
  CHECK(fs::exists(dir / "kept.json"));
  fs::remove_all(dir);
}

TEST_CASE("owners of swept things: the pid in a name, and whether it still exists") {
  CHECK(pid_after_prefix("pyshim-1234-Ab3xYz", "pyshim-") == 1234);
  CHECK(pid_after_prefix("kernel-watchdog-77", "kernel-watchdog-") == 77);
  CHECK_FALSE(pid_after_prefix("pyshim-", "pyshim-"));
  CHECK_FALSE(pid_after_prefix("pyshim-x1", "pyshim-"));
  CHECK_FALSE(pid_after_prefix("other-12", "pyshim-"));

  CHECK(process_exists(::getpid()));
  CHECK(process_exists(1));  // init: not ours to signal unless root, and it exists either way
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  CHECK_FALSE(process_exists(child));  // reaped: gone
}
