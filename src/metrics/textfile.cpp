#include "kwd/metrics/textfile.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

#include "kwd/util/private_files.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::metrics {
namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path) {
  throw std::system_error(errno, std::generic_category(), what + " " + path.string());
}

}  // namespace

void write_textfile(const std::filesystem::path& path, std::string_view text) {
  const auto dir_path = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const std::string name = path.filename().string();
  if (name.empty() || name == "." || name == "..") {
    errno = EINVAL;
    fail("not a file name:", path);
  }
  // Everything relative to one directory fd: a directory renamed under us cannot redirect
  // the temporary and the rename into another place.
  const util::UniqueFd dir(::open(dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) fail("cannot open the directory of", path);
  const std::string temporary = "." + name + ".tmp-" + util::random_name(8);
  const util::UniqueFd out(::openat(dir.get(), temporary.c_str(),
                                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!out) fail("cannot create a temporary beside", path);
  const auto discard = [&] { ::unlinkat(dir.get(), temporary.c_str(), 0); };
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(out.get(), text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      discard();
      errno = saved;
      fail("cannot write", path);
    }
    written += static_cast<std::size_t>(n);
  }
  // The umask must not hide the file from the collector's user.
  if (::fchmod(out.get(), 0644) != 0 ||
      ::renameat(dir.get(), temporary.c_str(), dir.get(), name.c_str()) != 0) {
    const int saved = errno;
    discard();
    errno = saved;
    fail("cannot replace", path);
  }
}

}  // namespace kwd::metrics
