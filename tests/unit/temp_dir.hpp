#pragma once

#include <stdlib.h>
#include <unistd.h>  // mkdtemp, on macOS

#include <filesystem>
#include <fstream>
#include <iterator>
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
  return {std::istreambuf_iterator<char>(in), {}};
}

// `text` as the file at `path`, its folders made first.
inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace kwd::test
