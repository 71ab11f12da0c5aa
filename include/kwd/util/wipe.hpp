#pragma once

#include <cstddef>

namespace kwd::util {

// Zeroes what held a secret (a key, the random bytes a name or key was drawn from) with stores
// the compiler may not drop as dead. Not OpenSSL's cleanse where it runs before the kernel's
// exec: libcrypto is opened at its first use (platform/deferred_library.hpp).
void wipe(void* data, std::size_t size) noexcept;

}  // namespace kwd::util
