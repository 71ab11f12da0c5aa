#include <catch2/catch.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/protocol/wire.hpp"

using kwd::protocol::DropReason;
using kwd::protocol::Message;
using kwd::protocol::MessageDecoder;
using kwd::protocol::MessageSigner;
using kwd::protocol::Secret;
using kwd::protocol::WireLimits;

namespace {

const std::string kWireKey = "a0436f6c-1916-498b-8eb9-e81ab9368e84";

// Frames exactly as jupyter_client 7.4.9's Session.serialize wrote them (same key).
const std::vector<std::string> kRecorded{
    "kernel.abc.execute_input",
    "<IDS|MSG>",
    "66a003765e72a772d78faec92badd094d8db5cd7aa51f6a34e17fc649a2b6b67",
    R"({"msg_id": "msg-2", "msg_type": "execute_input", "username": "u", "session": "sess-1", "date": "2026-01-01T00:00:01.000000Z", "version": "5.3"})",
    R"({"msg_id": "req-1", "msg_type": "execute_request", "username": "u", "session": "sess-1", "date": "2026-01-01T00:00:00.000000Z", "version": "5.3"})",
    "{}",
    R"j({"code": "model.fit(x, y, batch_size=512)", "execution_count": 12})j",
};

MessageDecoder decoder(WireLimits limits = {}) {
  return MessageDecoder(MessageSigner("hmac-sha256", Secret(kWireKey)), limits);
}

std::vector<std::string_view> views(const std::vector<std::string>& frames) {
  return {frames.begin(), frames.end()};
}

// Builds a correctly signed message from its four JSON parts (plus idents and buffers).
std::vector<std::string> signed_message(const std::string& header, const std::string& parent,
                                        const std::string& metadata, const std::string& content,
                                        std::vector<std::string> buffers = {}) {
  MessageSigner signer("hmac-sha256", Secret(kWireKey));
  const std::vector<std::string_view> parts{header, parent, metadata, content};
  std::vector<std::string> frames{
      "kernel.abc.status", "<IDS|MSG>", signer.sign(parts), header, parent, metadata, content};
  for (auto& b : buffers)
    frames.push_back(std::move(b));
  return frames;
}

const std::string kHeader = R"({"msg_id": "m1", "msg_type": "status", "date": "x"})";
const std::string kParent = R"({"msg_id": "r1", "msg_type": "execute_request"})";

}  // namespace

TEST_CASE("a message signed by jupyter_client is verified and parsed") {
  auto d = decoder();
  Message m;
  REQUIRE(d.decode(views(kRecorded), m) == DropReason::none);
  CHECK(m.topic == "kernel.abc.execute_input");
  CHECK(m.msg_type == "execute_input");
  CHECK(m.msg_id == "msg-2");
  CHECK(m.parent_msg_id == "req-1");
  CHECK(m.parent_msg_type == "execute_request");
  CHECK(m.content["code"] == "model.fit(x, y, batch_size=512)");
  CHECK(m.content["execution_count"] == 12);
  CHECK(m.buffer_count == 0);
  CHECK(m.date_ms() == 1767225601000);  // "2026-01-01T00:00:01.000000Z"
  CHECK(m.date_us == 1767225601000000);
}

TEST_CASE("a replayed message is refused the second time") {
  auto d = decoder();
  Message m;
  CHECK(d.decode(views(kRecorded), m) == DropReason::none);
  CHECK(d.decode(views(kRecorded), m) == DropReason::replayed_signature);
}

TEST_CASE("a tampered or unsigned message is dropped before its JSON is read") {
  auto d = decoder();
  Message m;
  auto tampered = kRecorded;
  tampered[6] = R"j({"code": "import os; os.system('rm -rf ~')", "execution_count": 12})j";
  CHECK(d.decode(views(tampered), m) == DropReason::bad_signature);

  auto wrong_key = signed_message(kHeader, kParent, "{}", R"({"execution_state": "busy"})");
  MessageDecoder other(MessageSigner("hmac-sha256", Secret("not the key")), {});
  CHECK(other.decode(views(wrong_key), m) == DropReason::bad_signature);

  auto unsigned_message = kRecorded;
  unsigned_message[2] = "";
  CHECK(d.decode(views(unsigned_message), m) == DropReason::unsigned_message);

  // Not JSON at all, but mis-signed: the signature is what fails, the JSON is never read.
  auto garbage = kRecorded;
  garbage[3] = "\x01\x02 not json";
  CHECK(d.decode(views(garbage), m) == DropReason::bad_signature);
}

TEST_CASE("correctly signed but malformed JSON is dropped as invalid_json or invalid_header") {
  auto d = decoder();
  Message m;
  CHECK(d.decode(views(signed_message(kHeader, kParent, "{}", "not json {")), m) ==
        DropReason::invalid_json);
  CHECK(d.decode(views(signed_message(kHeader, kParent, "{}", "[1,2]")), m) ==
        DropReason::invalid_json);
  CHECK(d.decode(views(signed_message(kHeader, kParent, "{}", R"({"a": 1} trailing)")), m) ==
        DropReason::invalid_json);
  CHECK(d.decode(views(signed_message("42", kParent, "{}", "{}")), m) == DropReason::invalid_json);
  CHECK(d.decode(views(signed_message(kHeader, "[]", "{}", "{}")), m) == DropReason::invalid_json);
  CHECK(d.decode(views(signed_message(kHeader, kParent, "nul", "{}")), m) ==
        DropReason::invalid_json);
  CHECK(d.decode(views(signed_message(R"({"msg_id": "m2"})", kParent, "{}", "{}")), m) ==
        DropReason::invalid_header);
  CHECK(d.decode(views(signed_message(R"({"msg_type": "status"})", kParent, "{}", "{}")), m) ==
        DropReason::invalid_header);
  // msg_type inside a nested object does not count as the header's.
  CHECK(d.decode(views(signed_message(R"({"msg_id": "m3", "x": {"msg_type": "status"}})", kParent,
                                      "{}", "{}")),
                 m) == DropReason::invalid_header);
}

TEST_CASE("truncated and delimiter-less messages are dropped") {
  auto d = decoder();
  Message m;
  std::vector<std::string> truncated(kRecorded.begin(), kRecorded.begin() + 6);
  CHECK(d.decode(views(truncated), m) == DropReason::too_few_frames);
  std::vector<std::string> only_delimiter{"<IDS|MSG>"};
  CHECK(d.decode(views(only_delimiter), m) == DropReason::too_few_frames);
  std::vector<std::string> no_delimiter(kRecorded.begin() + 2, kRecorded.end());
  CHECK(d.decode(views(no_delimiter), m) == DropReason::missing_delimiter);
  std::vector<std::string> empty;
  CHECK(d.decode(views(empty), m) == DropReason::missing_delimiter);
}

TEST_CASE("size and frame-count caps") {
  WireLimits limits;
  limits.max_frame_bytes = 1024;
  limits.max_message_bytes = 2048;
  limits.max_frames = 10;
  auto d = decoder(limits);
  Message m;
  CHECK(d.decode(views(signed_message(kHeader, kParent, "{}", "{}", {std::string(1025, 'x')})),
                 m) == DropReason::frame_too_large);
  CHECK(d.decode(views(signed_message(kHeader, kParent, "{}", "{}",
                                      {std::string(1000, 'x'), std::string(1000, 'y')})),
                 m) == DropReason::message_too_large);
  CHECK(d.decode(
            views(signed_message(kHeader, kParent, "{}", "{}", std::vector<std::string>(4, "b"))),
            m) == DropReason::too_many_frames);
  // Within the caps, buffers are counted and not parsed.
  REQUIRE(d.decode(views(signed_message(kHeader, kParent, "{}", R"({"execution_state": "idle"})",
                                        {std::string(100, '\0'), "abc"})),
                   m) == DropReason::none);
  CHECK(m.buffer_count == 2);
  CHECK(m.buffer_bytes == 103);
  CHECK(m.content["execution_state"] == "idle");
}

TEST_CASE("without a key nothing is checked, but everything is still parsed") {
  MessageDecoder d(MessageSigner("hmac-sha256", Secret{}), {});
  Message m;
  auto frames = signed_message(kHeader, kParent, "{}", R"({"execution_state": "busy"})");
  frames[2] = "";
  REQUIRE(d.decode(views(frames), m) == DropReason::none);
  CHECK(m.msg_type == "status");
  frames[6] = "{";
  CHECK(d.decode(views(frames), m) == DropReason::invalid_json);
}

TEST_CASE("drop counts are reported by reason name") {
  kwd::protocol::DropCounts counts;
  counts.add(DropReason::bad_signature);
  counts.add(DropReason::bad_signature);
  counts.add(DropReason::connection_reset);
  CHECK(counts.total() == 3);
  const auto j = counts.to_json();
  CHECK(j.size() == 2);
  CHECK(j["bad_signature"] == 2);
  CHECK(j["connection_reset"] == 1);
}

TEST_CASE("the signature history forgets the oldest beyond its capacity") {
  kwd::protocol::SignatureHistory h(3);
  CHECK(h.insert("a"));
  CHECK(h.insert("b"));
  CHECK(h.insert("c"));
  CHECK_FALSE(h.insert("a"));
  CHECK(h.insert("d"));  // evicts "a"
  CHECK(h.size() == 3);
  CHECK(h.insert("a"));  // evicts "b"
  CHECK_FALSE(h.insert("c"));
  CHECK(h.insert("b"));
}
