// IOPub message JSON, the watchdog's hot path: JsonFrameReader (simdjson, turned into
// nlohmann for the rest of the code) and KernelActivity (state, cells, outputs, errors,
// stderr) fed a sequence of messages, then the report's `execution` section.
//
// Input: HEADER \x1e PARENT \x1e METADATA \x1e CONTENT \x1e HEADER ... (tests/fuzz/frames.hpp),
// four frames a message, unsigned (signatures are fuzz_wire's).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "dump.hpp"
#include "frames.hpp"
#include "kwd/protocol/json_frame_reader.hpp"
#include "kwd/protocol/kernel_activity.hpp"
#include "kwd/protocol/wire.hpp"

namespace {

// What simdjson accepted, nlohmann's own parser must read as the same document.
void check_against_nlohmann(kwd::protocol::JsonFrameReader& reader, std::string_view frame) {
  nlohmann::json fast;
  if (!reader.read_object(frame, fast)) return;
  const auto slow = nlohmann::json::parse(frame, nullptr, /*allow_exceptions=*/false);
  if (slow.is_discarded() || slow != fast) std::abort();
  (void)fast.dump();  // strings are valid UTF-8 (simdjson checked): a strict dump cannot throw
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwd::protocol;
  const auto parts = kwd::fuzz::split_parts(data, size);
  kwd::protocol::JsonFrameReader reader;
  for (const auto part : parts)
    check_against_nlohmann(reader, part);

  MessageDecoder decoder(MessageSigner("hmac-sha256", Secret()), WireLimits{});
  KernelActivity activity(3);
  Message message;
  std::int64_t now_ms = 1'767'225'600'000;  // 2026-01-01, near the dates seeds carry
  kwd::timeline::MemorySample sample;
  for (std::size_t i = 0; i + 4 <= parts.size(); i += 4) {
    const std::string_view frames[] = {"kernel.fuzz.iopub", "<IDS|MSG>",  "",          parts[i],
                                       parts[i + 1],        parts[i + 2], parts[i + 3]};
    now_ms += 100;
    sample.t_ms = now_ms;
    sample.rss = static_cast<std::int64_t>(i) << 20;
    activity.on_memory_sample(sample);
    if (decoder.decode(frames, message) == DropReason::none) activity.on_message(message, now_ms);
  }
  (void)kwd::fuzz::dump(activity.to_json(now_ms + 1000));
  (void)activity.stderr_tail();
  return 0;
}
