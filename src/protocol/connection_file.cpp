#include "kwd/protocol/connection_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "kwd/platform/regular_file.hpp"
#include "kwd/protocol/message_signer.hpp"
#include "kwd/util/unique_fd.hpp"
#include "kwd/util/wipe.hpp"

namespace kwd::protocol {
namespace {

using nlohmann::json;

[[noreturn]] void fail(std::string_view field, std::string_view what) {
  throw ConnectionFileError("field '" + std::string(field) + "': " + std::string(what));
}

const char* type_name(const json& v) {
  return v.type_name();
}

// Port fields: an integer 0..65535 (0 = not chosen yet).
int read_port(const json& doc, const char* field, bool required) {
  const auto it = doc.find(field);
  if (it == doc.end() || it->is_null()) {
    if (required) fail(field, "missing");
    return 0;
  }
  if (!it->is_number_integer())
    fail(field, std::string("must be an integer port number, not ") + type_name(*it));
  const auto v = it->get<std::int64_t>();
  if (v < 0 || v > 65535) fail(field, "port " + std::to_string(v) + " is outside 0-65535");
  return static_cast<int>(v);
}

std::optional<std::string> read_string(const json& doc, const char* field) {
  const auto it = doc.find(field);
  if (it == doc.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) fail(field, std::string("must be a string, not ") + type_name(*it));
  return it->get<std::string>();
}

// Secret fields: same checks, but the value is never quoted and the copy is wiped.
Secret read_secret(const json& doc, const char* field) {
  const auto it = doc.find(field);
  if (it == doc.end() || it->is_null()) return {};
  if (!it->is_string()) fail(field, std::string("must be a string, not ") + type_name(*it));
  return Secret(it->get<std::string>());
}

// Also used on the secret key: the temporary copies are wiped.
bool valid_z85_key(std::string_view z85) {
  if (z85.size() != 40) return false;
  std::array<std::uint8_t, 32> out{};
  std::string copy(z85);  // zmq_z85_decode wants a NUL-terminated string
  const bool ok = zmq_z85_decode(out.data(), copy.c_str()) != nullptr;
  util::wipe(out.data(), out.size());
  wipe_string(copy);
  return ok;
}

std::optional<CurveKeys> read_curve(const json& doc) {
  auto server_public = read_string(doc, "curve_publickey");
  Secret secret = read_secret(doc, "curve_secretkey");
  if (!server_public && secret.empty()) return std::nullopt;
  if (!server_public) fail("curve_publickey", "missing while curve_secretkey is given");
  if (!valid_z85_key(*server_public))
    fail("curve_publickey", "must be a 40-character Z85 CurveZMQ key");
  if (!secret.empty()) {
    if (!valid_z85_key(secret.reveal()))
      fail("curve_secretkey", "must be a 40-character Z85 CurveZMQ key");
    std::array<char, 41> derived{};
    std::string secret_copy(secret.reveal());
    const int rc = zmq_curve_public(derived.data(), secret_copy.c_str());
    wipe_string(secret_copy);
    if (rc == 0 && std::string_view(derived.data(), 40) != *server_public)
      fail("curve_publickey", "does not belong to curve_secretkey");
  }
  return CurveKeys{std::move(*server_public), std::move(secret)};
}

// The parsed document holds the key in its strings too: they are wiped however parsing ends.
struct WipeSecretFields {
  json& doc;
  ~WipeSecretFields() {
    if (!doc.is_object()) return;
    for (const char* field : {"key", "curve_secretkey"}) {
      auto it = doc.find(field);
      if (it != doc.end() && it->is_string()) wipe_string(it->get_ref<std::string&>());
    }
  }
};

constexpr std::size_t kMaxFileBytes = 1 << 20;

// Reads with plain read(2) into one string, so no stream buffer keeps a copy of the key.
std::string read_whole_file(const std::filesystem::path& path) {
  // Only a regular file is opened: a FIFO put where the file should be must not stop the
  // watchdog's loop, and a device's driver must not see an open.
  auto file = platform::open_regular_file(AT_FDCWD, path.c_str());
  if (file.not_regular)
    throw ConnectionFileError(path.string() + ": not a regular file; not a connection file");
  if (!file.fd)
    throw ConnectionFileError(path.string() + ": cannot read (" + std::strerror(file.error) + ")");
  const util::UniqueFd fd = std::move(file.fd);
  std::string text;
  std::array<char, 4096> chunk{};
  for (;;) {
    const ssize_t n = ::read(fd.get(), chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      wipe_string(text);
      util::wipe(chunk.data(), chunk.size());
      throw ConnectionFileError(path.string() + ": cannot read (" + std::strerror(err) + ")");
    }
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > kMaxFileBytes) {
      wipe_string(text);
      util::wipe(chunk.data(), chunk.size());
      throw ConnectionFileError(path.string() + ": larger than 1 MiB; not a connection file");
    }
    text.append(chunk.data(), static_cast<std::size_t>(n));
  }
  util::wipe(chunk.data(), chunk.size());
  return text;
}

}  // namespace

bool ConnectionInfo::ipv6() const {
  return transport == Transport::tcp && ip.find(':') != std::string::npos;
}

std::string_view ConnectionInfo::transport_name() const {
  return transport == Transport::tcp ? "tcp" : "ipc";
}

std::string ConnectionInfo::endpoint(int port) const {
  if (transport == Transport::ipc) return "ipc://" + ip + "-" + std::to_string(port);
  if (ipv6()) return "tcp://[" + ip + "]:" + std::to_string(port);
  return "tcp://" + ip + ":" + std::to_string(port);
}

namespace {

ConnectionInfo parse_fields(const json& doc) {
  ConnectionInfo info;
  if (auto t = read_string(doc, "transport")) {
    if (*t == "tcp")
      info.transport = Transport::tcp;
    else if (*t == "ipc")
      info.transport = Transport::ipc;
    else
      fail("transport", "'" + *t + "' is neither tcp nor ipc");
  }
  if (auto ip = read_string(doc, "ip")) info.ip = *ip;
  if (info.transport == Transport::tcp) {
    // A kernel listening on every interface is reached on loopback.
    if (info.ip.empty() || info.ip == "0.0.0.0" || info.ip == "*") info.ip = "127.0.0.1";
    if (info.ip == "::") info.ip = "::1";
  } else if (info.ip.empty()) {
    fail("ip", "empty, but ipc needs a socket path prefix");
  }
  info.iopub_port = read_port(doc, "iopub_port", true);
  info.hb_port = read_port(doc, "hb_port", true);
  info.shell_port = read_port(doc, "shell_port", false);
  info.stdin_port = read_port(doc, "stdin_port", false);
  info.control_port = read_port(doc, "control_port", false);
  if (auto scheme = read_string(doc, "signature_scheme")) info.signature_scheme = *scheme;
  if (auto session = read_string(doc, "jupyter_session")) info.jupyter_session = *session;
  if (auto name = read_string(doc, "kernel_name")) info.kernel_name = *name;
  info.key = read_secret(doc, "key");
  if (auto problem = signature_scheme_problem(info.signature_scheme))
    fail("signature_scheme", *problem);
  info.curve = read_curve(doc);
  return info;
}

// Error messages quote non-secret values (a transport, a scheme); should one of them hold a
// secret anyway (a key pasted into the wrong field), it is cut out here.
std::string redact(std::string message, const json& doc) {
  for (const char* field : {"key", "curve_secretkey"}) {
    const auto it = doc.find(field);
    if (it == doc.end() || !it->is_string()) continue;
    const auto& secret = it->get_ref<const std::string&>();
    if (secret.empty()) continue;
    // Searched again after the mark: a key like "e" is also inside "<secret>".
    constexpr std::string_view mark = "<secret>";
    for (auto at = message.find(secret); at != std::string::npos;
         at = message.find(secret, at + mark.size()))
      message.replace(at, secret.size(), mark);
  }
  return message;
}

}  // namespace

ConnectionInfo parse_connection_info(std::string_view json_text) {
  // nlohmann's parse_error text quotes the bytes it last read, which may be the key: only
  // the position is passed on.
  json doc;
  try {
    doc = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    throw ConnectionFileError("not valid JSON (syntax error near byte " + std::to_string(e.byte) +
                              ")");
  } catch (const json::exception&) {
    // out_of_range 406, a number no double holds ("1e400"); its text quotes the number.
    throw ConnectionFileError("not valid JSON (a number out of range)");
  }
  const WipeSecretFields wipe_on_exit{doc};
  if (!doc.is_object())
    throw ConnectionFileError(std::string("not a JSON object but ") + doc.type_name());
  try {
    return parse_fields(doc);
  } catch (const ConnectionFileError& e) {
    throw ConnectionFileError(redact(e.what(), doc));
  }
}

ConnectionInfo load_connection_file(const std::filesystem::path& path) {
  std::string text = read_whole_file(path);
  try {
    ConnectionInfo info = parse_connection_info(text);
    wipe_string(text);
    return info;
  } catch (const ConnectionFileError& e) {
    wipe_string(text);
    throw ConnectionFileError(path.string() + ": " + e.what());
  }
}

}  // namespace kwd::protocol
