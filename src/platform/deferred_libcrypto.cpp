// libcrypto's functions that the watchdog calls (HMAC for the Jupyter wire protocol,
// comparing in constant time), each finding libcrypto's own at its first call (see
// kwd/platform/deferred_library.hpp), under the platform's names for it
// (src/platform/<os>/library_names.cpp). Declared by OpenSSL's headers: a definition here that
// does not match them does not compile. Without libcrypto no HMAC can be made (a signed
// kernel's messages are then refused, never accepted unchecked), and CRYPTO_memcmp still
// compares in constant time. Secrets are wiped with util::wipe, not OPENSSL_cleanse: a
// connection file is read before anything needs an HMAC.
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <openssl/params.h>

#include <cerrno>
#include <cstddef>

#include "kwd/platform/deferred_library.hpp"

#if OPENSSL_VERSION_MAJOR != 3
#error "OpenSSL 3 (libcrypto.so.3, libcrypto.3.dylib) expected"
#endif

namespace {

kwd::platform::DeferredLibrary& libcrypto() {
  static kwd::platform::DeferredLibrary library(kwd::platform::libcrypto_names());
  return library;
}

}  // namespace

extern "C" {

EVP_MD* EVP_MD_fetch(OSSL_LIB_CTX* context, const char* algorithm, const char* properties) {
  static const auto fn = libcrypto().function<decltype(&EVP_MD_fetch)>("EVP_MD_fetch");
  return fn != nullptr ? fn(context, algorithm, properties) : nullptr;
}

void EVP_MD_free(EVP_MD* md) {
  static const auto fn = libcrypto().function<decltype(&EVP_MD_free)>("EVP_MD_free");
  if (fn != nullptr) fn(md);
}

const char* EVP_MD_get0_name(const EVP_MD* md) {
  static const auto fn = libcrypto().function<decltype(&EVP_MD_get0_name)>("EVP_MD_get0_name");
  return fn != nullptr ? fn(md) : "";
}

unsigned long EVP_MD_get_flags(const EVP_MD* md) {
  static const auto fn = libcrypto().function<decltype(&EVP_MD_get_flags)>("EVP_MD_get_flags");
  return fn != nullptr ? fn(md) : 0;
}

EVP_MAC* EVP_MAC_fetch(OSSL_LIB_CTX* context, const char* algorithm, const char* properties) {
  static const auto fn = libcrypto().function<decltype(&EVP_MAC_fetch)>("EVP_MAC_fetch");
  return fn != nullptr ? fn(context, algorithm, properties) : nullptr;
}

void EVP_MAC_free(EVP_MAC* mac) {
  static const auto fn = libcrypto().function<decltype(&EVP_MAC_free)>("EVP_MAC_free");
  if (fn != nullptr) fn(mac);
}

EVP_MAC_CTX* EVP_MAC_CTX_new(EVP_MAC* mac) {
  static const auto fn = libcrypto().function<decltype(&EVP_MAC_CTX_new)>("EVP_MAC_CTX_new");
  return fn != nullptr ? fn(mac) : nullptr;
}

void EVP_MAC_CTX_free(EVP_MAC_CTX* context) {
  static const auto fn = libcrypto().function<decltype(&EVP_MAC_CTX_free)>("EVP_MAC_CTX_free");
  if (fn != nullptr) fn(context);
}

size_t EVP_MAC_CTX_get_mac_size(EVP_MAC_CTX* context) {
  static const auto fn =
      libcrypto().function<decltype(&EVP_MAC_CTX_get_mac_size)>("EVP_MAC_CTX_get_mac_size");
  return fn != nullptr ? fn(context) : 0;
}

int EVP_MAC_init(EVP_MAC_CTX* context, const unsigned char* key, size_t key_length,
                 const OSSL_PARAM params[]) {
  static const auto fn = libcrypto().function<decltype(&EVP_MAC_init)>("EVP_MAC_init");
  return fn != nullptr ? fn(context, key, key_length, params) : 0;
}

int EVP_MAC_update(EVP_MAC_CTX* context, const unsigned char* data, size_t length) {
  static const auto fn = libcrypto().function<decltype(&EVP_MAC_update)>("EVP_MAC_update");
  return fn != nullptr ? fn(context, data, length) : 0;
}

int EVP_MAC_final(EVP_MAC_CTX* context, unsigned char* out, size_t* out_length, size_t out_size) {
  static const auto fn = libcrypto().function<decltype(&EVP_MAC_final)>("EVP_MAC_final");
  return fn != nullptr ? fn(context, out, out_length, out_size) : 0;
}

OSSL_PARAM OSSL_PARAM_construct_utf8_string(const char* key, char* buffer, size_t size) {
  static const auto fn = libcrypto().function<decltype(&OSSL_PARAM_construct_utf8_string)>(
      "OSSL_PARAM_construct_utf8_string");
  return fn != nullptr ? fn(key, buffer, size) : OSSL_PARAM{};
}

OSSL_PARAM OSSL_PARAM_construct_end() {
  static const auto fn =
      libcrypto().function<decltype(&OSSL_PARAM_construct_end)>("OSSL_PARAM_construct_end");
  return fn != nullptr ? fn() : OSSL_PARAM{};
}

int CRYPTO_memcmp(const void* a, const void* b, size_t length) {
  static const auto fn = libcrypto().function<decltype(&CRYPTO_memcmp)>("CRYPTO_memcmp");
  if (fn != nullptr) return fn(a, b, length);
  // Every byte looked at, whatever differs first: no time spent tells where.
  const auto* x = static_cast<const volatile unsigned char*>(a);
  const auto* y = static_cast<const volatile unsigned char*>(b);
  unsigned char difference = 0;
  for (size_t i = 0; i < length; ++i)
    difference = static_cast<unsigned char>(difference | (x[i] ^ y[i]));
  return difference;
}

}  // extern "C"
