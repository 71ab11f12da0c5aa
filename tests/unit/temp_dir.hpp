#pragma once

#include <stdlib.h>
#include <unistd.h>  // mkdtemp, on macOS

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kwd::test {

// A private directory that is removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "kwd-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    path = ::mkdtemp(pattern.data());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return path / name;
  }
};

// A whole file's bytes ("" when it cannot be read).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  // Through the stream buffer, not an istreambuf_iterator: a character at a time, at the tests'
  // -O0 that made the report store's crash-safety test spend 200 s of CPU reading its reports.
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return std::move(bytes).str();
}

// `text` as the file at `path`, its folders made first.
inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace kwd::test
