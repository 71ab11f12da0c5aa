// IOPub messages parsed and verified per second by the watchdog's decoder, on messages
// recorded from a real ipykernel (bench/run_protocol_bench.py records them and runs this
// next to jupyter_client's Session.deserialize on the same recording).
//
// Usage: kwd-protocol-bench RECORDING KEY_FILE [SECONDS]
// RECORDING: for each message, a little-endian u32 frame count, then per frame a u32 length
// and the bytes. KEY_FILE: the connection key. Prints one JSON object on stdout:
// - the decoder alone (verify + parse), one thread, for SECONDS;
// - the whole receive path of the watchdog (libzmq SUB over TCP loopback, decoder, the
//   kernel-activity bookkeeping) fed by a publisher thread with the recording, 30 times.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "kwd/protocol/iopub_listener.hpp"
#include "kwd/protocol/kernel_activity.hpp"
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

// Publishes `passes` copies of the recording to a listener that is the watchdog's own
// IopubListener + KernelActivity; returns {messages per second received, believed, dropped}.
nlohmann::json through_zmq(const std::vector<std::vector<std::string_view>>& messages,
                           const kwd::protocol::Secret& key, int passes) {
  zmq::context_t publisher_context(1);
  zmq::socket_t publisher(publisher_context, zmq::socket_type::xpub);
  publisher.set(zmq::sockopt::sndhwm, 0);  // nothing dropped: the receiver sets the pace
  publisher.set(zmq::sockopt::linger, 0);
  publisher.bind("tcp://127.0.0.1:*");
  const std::string endpoint = publisher.get(zmq::sockopt::last_endpoint);

  kwd::protocol::ConnectionInfo info;
  info.iopub_port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  info.hb_port = 1;
  info.key = key;
  zmq::context_t listener_context(1);
  kwd::protocol::KernelActivity activity(10);
  std::uint64_t believed = 0;
  kwd::protocol::IopubListener listener(
      listener_context, info,
      kwd::protocol::MessageDecoder(kwd::protocol::MessageSigner("hmac-sha256", key), {}),
      [&](const kwd::protocol::Message& m) {
        activity.on_message(m, 0);
        ++believed;
      });
  zmq::message_t subscription;  // the listener's subscription: it is connected
  (void)publisher.recv(subscription);
  const std::uint64_t total = messages.size() * static_cast<std::uint64_t>(passes);
  std::thread sender([&] {
    for (int p = 0; p < passes; ++p)
      for (const auto& m : messages)
        for (std::size_t i = 0; i < m.size(); ++i)
          publisher.send(zmq::buffer(m[i].data(), m[i].size()),
                         i + 1 < m.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  });
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + std::chrono::seconds(120);
  while (listener.messages_seen() + listener.dropped().total() < total && clock::now() < deadline) {
    zmq_pollitem_t item{listener.socket_handle(), 0, ZMQ_POLLIN, 0};
    zmq_poll(&item, 1, 100);
    listener.receive(4096);
  }
  const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
  sender.join();
  return {{"messages", total},
          {"believed", believed},
          {"dropped", listener.dropped().total()},
          {"seconds", elapsed},
          {"messages_per_second", static_cast<double>(believed) / elapsed}};
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
        {"sink", sink},
        {"through_zmq", through_zmq(messages, key, 30)}};
    std::printf("%s\n", result.dump().c_str());
    return dropped == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kwd-protocol-bench: %s\n", e.what());
    return 1;
  }
}
