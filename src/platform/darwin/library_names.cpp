// libzmq 4 (ABI 5) and OpenSSL 3's libcrypto on macOS, which ships neither. The bare name
// first: a copy beside the program (DeferredLibrary tries it), then dyld's own search for a
// leaf name (DYLD_LIBRARY_PATH, then DYLD_FALLBACK_LIBRARY_PATH, by default /usr/local/lib and
// /usr/lib). Then the lib/ beside the program's bin/ (a conda environment's: dyld searches a
// leaf name in no LC_RPATH, so the @rpath a linked library had is lost). Then Homebrew's
// places, by full path, because dyld would not look there:
//   - /opt/homebrew is Homebrew's prefix on Apple silicon, on no default search path;
//   - /usr/local is its prefix on Intel Macs, named too because a DYLD_FALLBACK_LIBRARY_PATH
//     that a user sets replaces the default one, and the hardened runtime (and SIP, for
//     programs under /usr/bin that start us) drops every DYLD_ variable;
//   - openssl@3 is keg-only (macOS has a LibreSSL of its own): its libcrypto is never linked
//     into lib/, only into opt/openssl@3/lib/, the path that stays across upgrades.
// Never /usr/lib/libcrypto.dylib: Apple's LibreSSL, whose unversioned library aborts a
// process that loads it.
#include "kwd/platform/deferred_library.hpp"

namespace kwd::platform {
namespace {

constexpr const char* kLibzmq[] = {
    "libzmq.5.dylib",
    "@executable_path/../lib/libzmq.5.dylib",
    "/opt/homebrew/lib/libzmq.5.dylib",
    "/usr/local/lib/libzmq.5.dylib",
};
constexpr const char* kLibcrypto[] = {
    "libcrypto.3.dylib",
    "@executable_path/../lib/libcrypto.3.dylib",
    "/opt/homebrew/opt/openssl@3/lib/libcrypto.3.dylib",
    "/usr/local/opt/openssl@3/lib/libcrypto.3.dylib",
};

}  // namespace

std::span<const char* const> libzmq_names() noexcept {
  return kLibzmq;
}

std::span<const char* const> libcrypto_names() noexcept {
  return kLibcrypto;
}

}  // namespace kwd::platform
