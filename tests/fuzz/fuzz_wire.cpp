// The frames of one IOPub message as anyone who can reach the port may send them, through
// MessageDecoder: limits, the <IDS|MSG> delimiter, HMAC verification (any hmac-<hash> scheme,
// any key), replay detection, then the JSON frames.
//
// Input: SCHEME \x1e KEY \x1e FRAME \x1e FRAME ... (tests/fuzz/frames.hpp). A signature frame
// reading SIGN is replaced by the right signature, so that seeds get past the HMAC check to
// the JSON; any other signature is checked as sent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "dump.hpp"
#include "frames.hpp"
#include "kwd/protocol/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwd::protocol;
  const auto parts = kwd::fuzz::split_parts(data, size);
  if (parts.size() < 2) return 0;
  const Secret key{std::string(parts[1])};
  std::vector<std::string> frames(parts.begin() + 2, parts.end());

  std::optional<MessageSigner> signer;
  try {
    signer.emplace(parts[0], key);
  } catch (const SignatureSchemeError&) {
    return 0;  // the connection file's scheme is refused before any message is read
  }
  for (std::size_t i = 0; i + 6 <= frames.size(); ++i) {
    if (frames[i] != "<IDS|MSG>" || frames[i + 1] != "SIGN") continue;
    const std::vector<std::string_view> signed_part(frames.begin() + static_cast<long>(i) + 2,
                                                    frames.begin() + static_cast<long>(i) + 6);
    frames[i + 1] = signer->sign(signed_part);
    break;
  }
  const std::vector<std::string_view> views(frames.begin(), frames.end());

  WireLimits limits;  // small, so that the caps are reached too
  limits.max_frames = 24;
  limits.max_frame_bytes = 8192;
  limits.max_message_bytes = 32768;
  limits.replay_window = 4;
  MessageDecoder decoder(std::move(*signer), limits);
  Message message;
  const DropReason first = decoder.decode(views, message);
  const DropReason second = decoder.decode(views, message);
  // A signed message is believed once: the same signature again is a replay.
  if (first == DropReason::none && decoder.signs() && second != DropReason::replayed_signature)
    std::abort();
  if (first == DropReason::none && !decoder.signs() && second != DropReason::none) std::abort();

  DropCounts counts;
  counts.add(first);
  counts.add(second);
  (void)kwd::fuzz::dump(counts.to_json());
  (void)drop_reason_name(first);
  return 0;
}
