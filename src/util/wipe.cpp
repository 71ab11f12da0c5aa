#include "kwd/util/wipe.hpp"

namespace kwd::util {

void wipe(void* data, std::size_t size) noexcept {
  auto* bytes = static_cast<volatile unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i)
    bytes[i] = 0;
}

}  // namespace kwd::util
