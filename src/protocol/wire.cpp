#include "kwd/protocol/wire.hpp"

namespace kwd::protocol {
namespace {

using nlohmann::json;

constexpr std::string_view kDelimiter = "<IDS|MSG>";
constexpr std::size_t kSignedFrames = 4;  // header, parent_header, metadata, content

// Reads a header or parent_header without building a document: checks that the frame is
// one well-formed JSON object and keeps the two top-level strings we use. Most of a
// message's parsing time would otherwise go into headers nobody looks at.
class HeaderReader {
 public:
  HeaderReader(std::string* msg_id, std::string* msg_type) : msg_id_(msg_id), msg_type_(msg_type) {}

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t) { return value(); }
  bool number_float(json::number_float_t, const json::string_t&) { return value(); }
  bool binary(json::binary_t&) { return value(); }
  bool string(json::string_t& s) {
    if (depth_ == 1 && target_ != nullptr) target_->swap(s);
    return value();
  }
  bool start_object(std::size_t) {
    if (depth_ == 0 && seen_root_) return false;
    seen_root_ = true;
    ++depth_;
    target_ = nullptr;
    return true;
  }
  bool key(json::string_t& k) {
    target_ = nullptr;
    if (depth_ != 1) return true;
    if (msg_id_ != nullptr && k == "msg_id") target_ = msg_id_;
    if (msg_type_ != nullptr && k == "msg_type") target_ = msg_type_;
    return true;
  }
  bool end_object() {
    --depth_;
    target_ = nullptr;
    return true;
  }
  bool start_array(std::size_t) {
    if (depth_ == 0) return false;  // the root must be an object
    ++depth_;
    target_ = nullptr;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

  [[nodiscard]] bool read_an_object() const { return seen_root_ && depth_ == 0; }

 private:
  bool value() {
    target_ = nullptr;
    return depth_ > 0;  // a bare scalar is not an object
  }

  std::string* msg_id_;
  std::string* msg_type_;
  std::string* target_ = nullptr;
  int depth_ = 0;
  bool seen_root_ = false;
};

bool read_object(std::string_view frame, std::string* msg_id, std::string* msg_type) {
  HeaderReader reader(msg_id, msg_type);
  const bool ok = json::sax_parse(frame.begin(), frame.end(), &reader);
  return ok && reader.read_an_object();
}

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
  if (!read_object(signed_part[0], &out.msg_id, &out.msg_type)) return DropReason::invalid_json;
  if (out.msg_type.empty() || out.msg_id.empty()) return DropReason::invalid_header;
  if (!read_object(signed_part[1], &out.parent_msg_id, &out.parent_msg_type))
    return DropReason::invalid_json;
  if (!read_object(signed_part[2], nullptr, nullptr)) return DropReason::invalid_json;
  const std::string_view content = signed_part[3];
  out.content = json::parse(content.begin(), content.end(), nullptr, /*allow_exceptions=*/false);
  if (!out.content.is_object()) return DropReason::invalid_json;  // discarded counts too
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
