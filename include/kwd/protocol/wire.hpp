#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "kwd/protocol/json_frame_reader.hpp"
#include "kwd/protocol/message_signer.hpp"
#include "kwd/protocol/signature_history.hpp"
#include "kwd/protocol/wire_limits.hpp"

namespace kwd::protocol {

// Why a message was not believed. Every drop is counted under one of these.
enum class DropReason : std::uint8_t {
  none = 0,
  missing_delimiter,  // no <IDS|MSG> frame
  too_few_frames,     // fewer than signature + header + parent + metadata + content
  too_many_frames,
  frame_too_large,
  message_too_large,
  unsigned_message,  // empty signature while the connection file has a key
  bad_signature,
  replayed_signature,  // a signature already seen: a replayed message
  invalid_json,        // a signed frame that is not a JSON object
  invalid_header,      // no msg_type / msg_id
  connection_reset,    // libzmq cut the stream (e.g. a frame over the cap); its contents lost
  count_
};
inline constexpr std::size_t kDropReasonCount = static_cast<std::size_t>(DropReason::count_);
std::string_view drop_reason_name(DropReason reason);

// One IOPub message, believed: signature checked, JSON parsed.
struct Message {
  std::string topic;  // first ident frame ("kernel.<id>.status"), may be empty
  std::string msg_id;
  std::string msg_type;
  std::string parent_msg_id;  // "" when the message has no parent
  std::string parent_msg_type;
  // The header's date (when the kernel made it), to the microsecond as the kernel wrote it;
  // -1 if none.
  std::int64_t date_us = -1;
  [[nodiscard]] std::int64_t date_ms() const { return date_us < 0 ? -1 : date_us / 1000; }
  nlohmann::json content;
  std::size_t content_bytes = 0;  // size of the content frame as sent
  std::size_t buffer_count = 0;
  std::size_t buffer_bytes = 0;
};

// Turns the frames of one multipart message into a Message, or says why not. The signature
// is verified (constant time) before any JSON is parsed: nothing unsigned is believed.
class MessageDecoder {
 public:
  MessageDecoder(MessageSigner signer, WireLimits limits);

  // Fills `out` (its storage is reused between calls) and returns DropReason::none, or
  // returns why the message was dropped; `out` is then unspecified.
  DropReason decode(std::span<const std::string_view> frames, Message& out);

  [[nodiscard]] const WireLimits& limits() const noexcept { return limits_; }
  [[nodiscard]] bool signs() const noexcept { return signer_.signs(); }

 private:
  MessageSigner signer_;
  JsonFrameReader json_;
  WireLimits limits_;
  SignatureHistory history_;
  std::string date_;  // reused
};

// Counts of dropped messages by reason.
class DropCounts {
 public:
  void add(DropReason reason) noexcept { ++counts_[static_cast<std::size_t>(reason)]; }
  [[nodiscard]] std::uint64_t of(DropReason reason) const noexcept {
    return counts_[static_cast<std::size_t>(reason)];
  }
  [[nodiscard]] std::uint64_t total() const noexcept;
  // {"bad_signature": 3, ...}: only reasons that happened.
  [[nodiscard]] nlohmann::json to_json() const;

 private:
  std::array<std::uint64_t, kDropReasonCount> counts_{};
};

}  // namespace kwd::protocol
