#include "kwd/util/random_bytes.hpp"

#include <sys/random.h>

#include <cerrno>
#include <system_error>

namespace kwd::util {

void random_bytes(unsigned char* out, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::getrandom(out, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), "getrandom");
    out += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace kwd::util
