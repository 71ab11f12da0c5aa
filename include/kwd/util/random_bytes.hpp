#pragma once

#include <cstddef>

namespace kwd::util {

// Fills `out` from the operating system's cryptographic generator (getrandom, arc4random).
// Throws std::system_error when it cannot. No library state to set up: it is called before
// the kernel starts (the shim directory's name), where OpenSSL's generator spent its first
// call loading its configuration and providers (15 % of `run`'s CPU up to the exec).
void random_bytes(unsigned char* out, std::size_t size);

}  // namespace kwd::util
