// The sonames of Debian's (and every distribution's) libzmq 4 and OpenSSL 3 libcrypto: the
// dynamic loader's own search finds them (ld.so.cache, LD_LIBRARY_PATH), and a copy beside
// the program (the wheel's) is tried first by DeferredLibrary.
#include "kwd/platform/deferred_library.hpp"

namespace kwd::platform {
namespace {

constexpr const char* kLibzmq[] = {"libzmq.so.5"};
constexpr const char* kLibcrypto[] = {"libcrypto.so.3"};

}  // namespace

std::span<const char* const> libzmq_names() noexcept {
  return kLibzmq;
}

std::span<const char* const> libcrypto_names() noexcept {
  return kLibcrypto;
}

}  // namespace kwd::platform
