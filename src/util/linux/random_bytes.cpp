#include "kwd/util/random_bytes.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "kwd/util/unique_fd.hpp"

namespace kwd::util {
namespace {

// Where getrandom is missing (Linux before 3.17) or refused (an old container's seccomp
// profile): the device it stands for.
void from_urandom(unsigned char* out, std::size_t size) {
  const UniqueFd urandom(::open("/dev/urandom", O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!urandom) throw std::system_error(errno, std::generic_category(), "/dev/urandom");
  while (size > 0) {
    const ssize_t n = ::read(urandom.get(), out, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw std::system_error(n < 0 ? errno : EIO, std::generic_category(), "/dev/urandom");
    out += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace

void random_bytes(unsigned char* out, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::getrandom(out, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == ENOSYS || errno == EPERM)) return from_urandom(out, size);
    if (n < 0) throw std::system_error(errno, std::generic_category(), "getrandom");
    out += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace kwd::util
