// A connection file is written by whoever starts the kernel: parse_connection_info must turn
// any bytes into a ConnectionInfo or a ConnectionFileError, and the error must never quote the
// key.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "kwd/protocol/connection_file.hpp"
#include "kwd/protocol/message_signer.hpp"

namespace {

// The key the file holds, when it is a JSON object with a string "key"; empty if not.
std::string key_of(std::string_view text) {
  const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return {};
  const auto it = doc.find("key");
  return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Redaction replaces the key with "<secret>": a key sharing no character with that
// replacement can then no longer occur anywhere in the message.
bool redaction_checkable(const std::string& key) {
  return !key.empty() && key.find_first_of("<secret>") == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto info = kwd::protocol::parse_connection_info(text);
    (void)info.endpoint(info.iopub_port);
    (void)info.endpoint(info.hb_port);
    (void)info.ports_known();
    // The scheme was accepted: a signer can be made from it and the key.
    kwd::protocol::MessageSigner signer(info.signature_scheme, info.key);
    const std::string_view parts[] = {text, text.substr(size / 2)};
    const auto signature = signer.sign(parts);
    if (!signer.verify(signature, parts)) std::abort();
  } catch (const kwd::protocol::ConnectionFileError& e) {
    const std::string key = key_of(text);
    if (redaction_checkable(key) && std::string_view(e.what()).find(key) != std::string::npos)
      std::abort();  // the key leaked into an error message
  }
  return 0;
}
