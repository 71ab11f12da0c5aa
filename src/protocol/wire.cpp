#include "kwd/protocol/wire.hpp"

#include "kwd/protocol/message_date.hpp"

namespace kwd::protocol {
namespace {

using nlohmann::json;

constexpr std::string_view kDelimiter = "<IDS|MSG>";
constexpr std::size_t kSignedFrames = 4;  // header, parent_header, metadata, content

}  // namespace

std::string_view drop_reason_name(DropReason reason) {
  switch (reason) {
    case DropReason::none:
      return "none";
    case DropReason::missing_delimiter:
      return "missing_delimiter";
    case DropReason::too_few_frames:
      return "too_few_frames";
    case DropReason::too_many_frames:
      return "too_many_frames";
    case DropReason::frame_too_large:
      return "frame_too_large";
    case DropReason::message_too_large:
      return "message_too_large";
    case DropReason::unsigned_message:
      return "unsigned";
    case DropReason::bad_signature:
      return "bad_signature";
    case DropReason::replayed_signature:
      return "replayed_signature";
    case DropReason::invalid_json:
      return "invalid_json";
    case DropReason::invalid_header:
      return "invalid_header";
    case DropReason::connection_reset:
      return "connection_reset";
    case DropReason::count_:
      break;
  }
  return "unknown";
}

MessageDecoder::MessageDecoder(MessageSigner signer, WireLimits limits)
    : signer_(std::move(signer)), limits_(limits), history_(limits.replay_window) {}

DropReason MessageDecoder::decode(std::span<const std::string_view> frames, Message& out) {
  if (frames.size() > limits_.max_frames) return DropReason::too_many_frames;
  std::size_t total = 0;
  for (std::string_view f : frames) {
    if (f.size() > limits_.max_frame_bytes) return DropReason::frame_too_large;
    total += f.size();
  }
  if (total > limits_.max_message_bytes) return DropReason::message_too_large;

  std::size_t delimiter = 0;
  while (delimiter < frames.size() && frames[delimiter] != kDelimiter)
    ++delimiter;
  if (delimiter == frames.size()) return DropReason::missing_delimiter;
  if (frames.size() - delimiter - 1 < 1 + kSignedFrames) return DropReason::too_few_frames;

  const std::string_view signature = frames[delimiter + 1];
  const auto signed_part = frames.subspan(delimiter + 2, kSignedFrames);
  if (signer_.signs()) {
    if (signature.empty()) return DropReason::unsigned_message;
    if (!signer_.verify(signature, signed_part)) return DropReason::bad_signature;
    // Only a verified signature enters the history: forgeries cannot evict real ones.
    if (!history_.insert(signature)) return DropReason::replayed_signature;
  }

  out.msg_id.clear();
  out.msg_type.clear();
  out.parent_msg_id.clear();
  out.parent_msg_type.clear();
  // Every frame is validated whole; only what is used is built.
  date_.clear();
  if (!json_.read_header(signed_part[0], &out.msg_id, &out.msg_type, &date_))
    return DropReason::invalid_json;
  out.date_us = parse_message_date_us(date_).value_or(-1);
  if (out.msg_type.empty() || out.msg_id.empty()) return DropReason::invalid_header;
  if (!json_.read_header(signed_part[1], &out.parent_msg_id, &out.parent_msg_type))
    return DropReason::invalid_json;
  if (!json_.read_header(signed_part[2], nullptr, nullptr)) return DropReason::invalid_json;
  const std::string_view content = signed_part[3];
  if (!json_.read_object(content, out.content)) return DropReason::invalid_json;
  out.content_bytes = content.size();

  if (delimiter > 0)
    out.topic.assign(frames[0]);
  else
    out.topic.clear();
  out.buffer_count = frames.size() - delimiter - 1 - 1 - kSignedFrames;
  out.buffer_bytes = 0;
  for (std::string_view b : frames.subspan(delimiter + 2 + kSignedFrames))
    out.buffer_bytes += b.size();
  return DropReason::none;
}

std::uint64_t DropCounts::total() const noexcept {
  std::uint64_t n = 0;
  for (auto c : counts_)
    n += c;
  return n;
}

json DropCounts::to_json() const {
  json out = json::object();
  for (std::size_t i = 1; i < kDropReasonCount; ++i)
    if (counts_[i] > 0) out[std::string(drop_reason_name(static_cast<DropReason>(i)))] = counts_[i];
  return out;
}

}  // namespace kwd::protocol
