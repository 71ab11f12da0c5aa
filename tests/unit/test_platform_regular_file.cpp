#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "kwd/platform/regular_file.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using kwd::platform::open_regular_file;
using kwd::platform::read_up_to;
using kwd::test::TempDir;

TEST_CASE("a regular file is opened for reading, with its stat") {
  TempDir dir("kwd-regular");
  const fs::path file = dir.path / "kernel-1.json";
  std::ofstream(file) << "{\"key\": \"x\"}";
  auto opened = open_regular_file(AT_FDCWD, file.c_str());
  REQUIRE(opened.fd);
  CHECK_FALSE(opened.not_regular);
  CHECK(opened.st.st_size == 12);
  CHECK(read_up_to(opened.fd.get(), 100) == "{\"key\": \"x\"}");
  CHECK((::fcntl(opened.fd.get(), F_GETFL) & O_ACCMODE) == O_RDONLY);
  CHECK((::fcntl(opened.fd.get(), F_GETFD) & FD_CLOEXEC) != 0);

  // Relative to a directory descriptor, too; and read_up_to stops at its bound.
  const int dir_fd = ::open(dir.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(dir_fd >= 0);
  opened = open_regular_file(dir_fd, "kernel-1.json", O_NOFOLLOW);
  ::close(dir_fd);
  REQUIRE(opened.fd);
  CHECK(read_up_to(opened.fd.get(), 4) == "{\"ke");
}

TEST_CASE("read_up_to reads a file larger than its first buffer whole, or to its bound") {
  TempDir dir("kwd-regular");
  std::string text;
  for (int i = 0; text.size() < 100'000; ++i)
    text += std::to_string(i) + ",";
  const fs::path file = dir.path / "large.json";
  std::ofstream(file, std::ios::binary) << text;
  const auto read = [&](std::size_t bound) {
    const auto opened = open_regular_file(AT_FDCWD, file.c_str());
    REQUIRE(opened.fd);
    return read_up_to(opened.fd.get(), bound);
  };
  CHECK(read(1 << 20) == text);
  CHECK(read(text.size()) == text);
  CHECK(read(16384) == text.substr(0, 16384));
  CHECK(read(40'000) == text.substr(0, 40'000));
  CHECK(read(0) == "");
}

TEST_CASE("what is no regular file is refused without being opened") {
  TempDir dir("kwd-regular");
  const fs::path fifo = dir.path / "kernel-fifo.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);

  // A writer waits in open() until a reader opens the FIFO. Looking at it must not release
  // that writer: the FIFO is never opened, not even without blocking.
  std::atomic<bool> writer_through{false};
  std::thread writer([&] {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    writer_through = true;
    if (fd >= 0) ::close(fd);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto looked = open_regular_file(AT_FDCWD, fifo.c_str());
  CHECK(looked.not_regular);
  CHECK_FALSE(looked.fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(writer_through.load());
  // Release the writer.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  writer.join();
  if (reader >= 0) ::close(reader);
  CHECK(writer_through.load());

  CHECK(open_regular_file(AT_FDCWD, dir.path.c_str()).not_regular);
  CHECK(open_regular_file(AT_FDCWD, "/dev/null").not_regular);

  const auto missing = open_regular_file(AT_FDCWD, (dir.path / "gone.json").c_str());
  CHECK_FALSE(missing.fd);
  CHECK_FALSE(missing.not_regular);
  CHECK(missing.error == ENOENT);
}

TEST_CASE("a symbolic link is followed unless O_NOFOLLOW says otherwise") {
  TempDir dir("kwd-regular");
  const fs::path target = dir.path / "real.json";
  std::ofstream(target) << "{}";
  const fs::path link = dir.path / "link.json";
  fs::create_symlink(target, link);
  const auto followed = open_regular_file(AT_FDCWD, link.c_str());
  REQUIRE(followed.fd);
  CHECK(read_up_to(followed.fd.get(), 10) == "{}");
  const auto refused = open_regular_file(AT_FDCWD, link.c_str(), O_NOFOLLOW);
  CHECK_FALSE(refused.fd);
  CHECK(refused.not_regular);

  // A link to a FIFO is a FIFO.
  const fs::path fifo = dir.path / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const fs::path to_fifo = dir.path / "to-fifo.json";
  fs::create_symlink(fifo, to_fifo);
  CHECK(open_regular_file(AT_FDCWD, to_fifo.c_str()).not_regular);
}
