#pragma once

#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kwd/protocol/secret.hpp"

namespace kwd::protocol {

// A signature_scheme we cannot use. The message names the scheme, never the key.
struct SignatureSchemeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The Jupyter message signature: HMAC over the header, parent_header, metadata and content
// frames, as lowercase hex, with the hash the connection file's `signature_scheme` names
// ("hmac-sha256", or any other "hmac-<hashlib name>" OpenSSL provides). An empty key means
// messages are not signed, as jupyter_client's Session treats it.
class MessageSigner {
 public:
  // Throws SignatureSchemeError for a scheme that is not "hmac-<hash>" or an unknown hash.
  MessageSigner(std::string_view scheme, const Secret& key);
  MessageSigner(MessageSigner&&) noexcept;
  MessageSigner& operator=(MessageSigner&&) noexcept;
  ~MessageSigner();

  [[nodiscard]] bool signs() const noexcept { return signs_; }
  [[nodiscard]] const std::string& scheme() const noexcept { return scheme_; }

  // Lowercase hex HMAC of the parts, in order; "" when not signing.
  [[nodiscard]] std::string sign(std::span<const std::string_view> parts);
  // Constant-time comparison of `signature` with sign(parts).
  [[nodiscard]] bool verify(std::string_view signature, std::span<const std::string_view> parts);

 private:
  bool compute(std::span<const std::string_view> parts, std::string& hex);
  struct Mac;
  std::unique_ptr<Mac> mac_;
  std::string scheme_;
  bool signs_ = false;
};

// Why a scheme cannot be used ("'hmac-foo': this OpenSSL has no hash 'foo'"), or nullopt.
[[nodiscard]] std::optional<std::string> signature_scheme_problem(std::string_view scheme);

}  // namespace kwd::protocol
