#include "kwd/protocol/message_signer.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace kwd::protocol {

// Not in the anonymous namespace: MessageSigner::Mac's members hold it, and a member of a class
// with external linkage may not have a type of internal linkage (GCC's -Wsubobject-linkage says
// so once this file is compiled inside a unity batch).
struct MacDeleter {
  void operator()(EVP_MAC* p) const noexcept { EVP_MAC_free(p); }
  void operator()(EVP_MAC_CTX* p) const noexcept { EVP_MAC_CTX_free(p); }
  void operator()(EVP_MD* p) const noexcept { EVP_MD_free(p); }
};

namespace {

// Python's hashlib names (what jupyter_client accepts after "hmac-") to OpenSSL's.
std::string openssl_digest_name(std::string_view hashlib_name) {
  if (hashlib_name == "blake2b") return "BLAKE2B-512";
  if (hashlib_name == "blake2s") return "BLAKE2S-256";
  std::string name(hashlib_name);
  for (char& c : name) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (c == '_') c = '-';
  }
  return name;
}

// The digest to use, or why not (a message without the key: only the scheme is quoted).
std::unique_ptr<EVP_MD, MacDeleter> fetch_digest(std::string_view scheme, std::string& why) {
  constexpr std::string_view kPrefix = "hmac-";
  if (!scheme.starts_with(kPrefix) || scheme.size() == kPrefix.size()) {
    why = "'" + std::string(scheme) + "' is not of the form hmac-<hash>";
    return nullptr;
  }
  const std::string hash = openssl_digest_name(scheme.substr(kPrefix.size()));
  std::unique_ptr<EVP_MD, MacDeleter> md(EVP_MD_fetch(nullptr, hash.c_str(), nullptr));
  if (!md) {
    why = "'" + std::string(scheme) + "': this OpenSSL has no hash '" +
          std::string(scheme.substr(kPrefix.size())) + "'";
    return nullptr;
  }
  if ((EVP_MD_get_flags(md.get()) & EVP_MD_FLAG_XOF) != 0) {
    why = "'" + std::string(scheme) + "': an extendable-output hash cannot key an HMAC";
    return nullptr;
  }
  return md;
}

}  // namespace

struct MessageSigner::Mac {
  std::unique_ptr<EVP_MAC, MacDeleter> mac;
  std::unique_ptr<EVP_MAC_CTX, MacDeleter> ctx;
  std::size_t digest_size = 0;
  std::string hex;  // reused output buffer
};

std::optional<std::string> signature_scheme_problem(std::string_view scheme) {
  std::string why;
  if (fetch_digest(scheme, why)) return std::nullopt;
  return why;
}

MessageSigner::MessageSigner(std::string_view scheme, const Secret& key) : scheme_(scheme) {
  std::string why;
  auto md = fetch_digest(scheme, why);
  if (!md) throw SignatureSchemeError("signature_scheme " + why);
  if (key.empty()) return;  // unsigned: Session(key=b"") neither signs nor checks

  auto mac = std::make_unique<Mac>();
  mac->mac.reset(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  if (mac->mac) mac->ctx.reset(EVP_MAC_CTX_new(mac->mac.get()));
  if (!mac->ctx) throw SignatureSchemeError("OpenSSL has no HMAC");
  std::string digest_name = EVP_MD_get0_name(md.get());
  const std::array<OSSL_PARAM, 2> params{
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name.data(), 0),
      OSSL_PARAM_construct_end()};
  const auto bytes = key.reveal();
  // The key is installed once; every message re-initialises the context with it (a NULL key
  // to EVP_MAC_init means "the same key"), which saves the key schedule per message.
  if (EVP_MAC_init(mac->ctx.get(), reinterpret_cast<const unsigned char*>(bytes.data()),
                   bytes.size(), params.data()) != 1)
    throw SignatureSchemeError("signature_scheme '" + std::string(scheme) +
                               "': OpenSSL refused to key an HMAC with it");
  mac->digest_size = EVP_MAC_CTX_get_mac_size(mac->ctx.get());
  mac_ = std::move(mac);
  signs_ = true;
}

MessageSigner::MessageSigner(MessageSigner&&) noexcept = default;
MessageSigner& MessageSigner::operator=(MessageSigner&&) noexcept = default;
MessageSigner::~MessageSigner() = default;

bool MessageSigner::compute(std::span<const std::string_view> parts, std::string& hex) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  std::size_t length = 0;
  EVP_MAC_CTX* ctx = mac_->ctx.get();
  bool ok = EVP_MAC_init(ctx, nullptr, 0, nullptr) == 1;
  for (std::string_view p : parts)
    ok = ok && EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(p.data()), p.size()) == 1;
  ok = ok && EVP_MAC_final(ctx, digest.data(), &length, digest.size()) == 1;
  if (!ok) return false;
  static constexpr char kHex[] = "0123456789abcdef";
  hex.resize(length * 2);
  for (std::size_t i = 0; i < length; ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return true;
}

std::string MessageSigner::sign(std::span<const std::string_view> parts) {
  std::string hex;
  if (signs_ && !compute(parts, hex)) hex.clear();
  return hex;
}

bool MessageSigner::verify(std::string_view signature, std::span<const std::string_view> parts) {
  if (!signs_) return true;
  if (signature.size() != mac_->digest_size * 2) return false;  // the length is no secret
  // A failed computation fails closed: no signature matches it.
  if (!compute(parts, mac_->hex) || mac_->hex.size() != signature.size()) return false;
  return CRYPTO_memcmp(mac_->hex.data(), signature.data(), signature.size()) == 0;
}

}  // namespace kwd::protocol
