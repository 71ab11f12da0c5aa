// IOPub messages parsed and verified per second by the watchdog's decoder, on messages
// recorded from a real ipykernel (bench/run_protocol_bench.py records them and runs this
// next to jupyter_client's Session.deserialize on the same recording).
//
// Usage: kwd-protocol-bench RECORDING KEY_FILE [SECONDS]
// RECORDING: for each message, a little-endian u32 frame count, then per frame a u32 length
// and the bytes. KEY_FILE: the connection key. Prints one JSON object on stdout.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/protocol/wire.hpp"

namespace {

using kwd::protocol::DropReason;

std::string slurp(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot read ") + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::uint32_t read_u32(std::string_view data, std::size_t& at) {
  if (at + 4 > data.size()) throw std::runtime_error("truncated recording");
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(data[at + i]);
  at += 4;
  return v;
}

std::vector<std::vector<std::string_view>> parse_recording(std::string_view data) {
  std::vector<std::vector<std::string_view>> messages;
  std::size_t at = 0;
  while (at < data.size()) {
    const std::uint32_t frames = read_u32(data, at);
    auto& m = messages.emplace_back();
    for (std::uint32_t i = 0; i < frames; ++i) {
      const std::uint32_t length = read_u32(data, at);
      if (at + length > data.size()) throw std::runtime_error("truncated recording");
      m.emplace_back(data.substr(at, length));
      at += length;
    }
  }
  return messages;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s RECORDING KEY_FILE [SECONDS]\n", argv[0]);
    return 2;
  }
  try {
    const std::string data = slurp(argv[1]);
    std::string key_text = slurp(argv[2]);
    while (!key_text.empty() && (key_text.back() == '\n' || key_text.back() == '\r'))
      key_text.pop_back();
    const kwd::protocol::Secret key(key_text);
    const double seconds = argc > 3 ? std::stod(argv[3]) : 3.0;
    const auto messages = parse_recording(data);
    if (messages.empty()) throw std::runtime_error("empty recording");
    std::size_t bytes_per_pass = 0;
    for (const auto& m : messages)
      for (auto f : m)
        bytes_per_pass += f.size();

    // Each pass gets a fresh decoder, as the Python side gets a fresh Session: both refuse
    // a signature seen before, and every pass replays the same recording.
    std::uint64_t decoded = 0, dropped = 0, passes = 0;
    std::uint64_t sink = 0;  // keeps the results observable
    kwd::protocol::Message out;
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    double elapsed = 0;
    do {
      kwd::protocol::MessageDecoder decoder(kwd::protocol::MessageSigner("hmac-sha256", key),
                                            kwd::protocol::WireLimits{});
      for (const auto& m : messages) {
        if (decoder.decode(m, out) == DropReason::none) {
          ++decoded;
          sink += out.msg_type.size() + out.content.size();
        } else {
          ++dropped;
        }
      }
      ++passes;
      elapsed = std::chrono::duration<double>(clock::now() - start).count();
    } while (elapsed < seconds);

    const nlohmann::json result{
        {"messages_per_pass", messages.size()},
        {"bytes_per_pass", bytes_per_pass},
        {"passes", passes},
        {"decoded", decoded},
        {"dropped", dropped},
        {"seconds", elapsed},
        {"messages_per_second", static_cast<double>(decoded + dropped) / elapsed},
        {"sink", sink}};
    std::printf("%s\n", result.dump().c_str());
    return dropped == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kwd-protocol-bench: %s\n", e.what());
    return 1;
  }
}
