#include "kwd/util/private_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kwd/util/process_exists.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::util {
namespace fs = std::filesystem;

namespace {
std::string errno_text(int err) {
  return std::strerror(err);
}

[[noreturn]] void fail(const std::string& what, const fs::path& path, int err) {
  throw FileError(what + " " + path.string() + ": " + errno_text(err));
}
}  // namespace

void ensure_private_dir(const fs::path& dir) {
  if (dir.empty()) throw FileError("empty directory path");
  fs::path partial;
  for (const auto& part : dir) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) == 0 || errno == EEXIST) continue;
    fail("cannot create directory", partial, errno);
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) fail("cannot inspect", dir, errno);
  if (!S_ISDIR(st.st_mode)) throw FileError(dir.string() + " exists and is not a directory");
  if (st.st_uid != ::geteuid()) throw FileError(dir.string() + " belongs to another user");
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
    fail("cannot make private", dir, errno);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) fail("cannot write into", dir, errno);
}

fs::path write_file_atomically(const fs::path& dir, std::string_view name,
                               std::string_view contents, unsigned mode) {
  std::string tmpl =
      (dir / (std::string(kTemporaryPrefix) + std::to_string(::getpid()) + "-XXXXXX")).string();
  std::vector<char> tmp_name(tmpl.begin(), tmpl.end());
  tmp_name.push_back('\0');
  UniqueFd fd(::mkostemp(tmp_name.data(), O_CLOEXEC));
  if (!fd) fail("cannot create a temporary file in", dir, errno);
  const fs::path tmp_path(tmp_name.data());
  auto abandon = [&](const std::string& what) {
    const int err = errno;
    ::unlink(tmp_path.c_str());
    fail(what, tmp_path, err);
  };
  if (::fchmod(fd.get(), static_cast<mode_t>(mode)) != 0) abandon("cannot set the mode of");
  std::size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) abandon("cannot write");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) abandon("cannot fsync");
  if (::close(fd.release()) != 0) abandon("cannot close");
  const fs::path final_path = dir / std::string(name);
  if (::rename(tmp_path.c_str(), final_path.c_str()) != 0) abandon("cannot rename into place");
  UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd) ::fsync(dir_fd.get());  // best effort: the file itself is already durable
  return final_path;
}

int sweep_temporaries(const fs::path& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kTemporaryPrefix)) continue;
    const pid_t writer = pid_after_prefix(name, kTemporaryPrefix).value_or(0);
    if (writer > 0 && process_exists(writer)) continue;
    if (fs::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace kwd::util
