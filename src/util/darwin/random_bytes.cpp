#include "kwd/util/random_bytes.hpp"

#include <stdlib.h>

namespace kwd::util {

void random_bytes(unsigned char* out, std::size_t size) {
  ::arc4random_buf(out, size);  // cannot fail
}

}  // namespace kwd::util
