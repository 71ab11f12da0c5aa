#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kwd/protocol/secret.hpp"

namespace kwd::protocol {

// What is wrong with a connection file, naming the field. Never carries the key or a
// secret key: messages are built from field names and non-secret values only.
struct ConnectionFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Transport { tcp, ipc };

// CurveZMQ, when the file carries the kernel's keys (jupyter_client >= 8.9).
struct CurveKeys {
  std::string server_public;  // curve_publickey: the kernel's public key, Z85 (40 chars)
  Secret secret;              // curve_secretkey, Z85; may be empty (then we make our own pair)
};

// The parts of a kernel connection file the watchdog uses.
struct ConnectionInfo {
  Transport transport = Transport::tcp;
  std::string ip = "127.0.0.1";  // for ipc: the socket path prefix
  int shell_port = 0;
  int iopub_port = 0;
  int stdin_port = 0;
  int control_port = 0;
  int hb_port = 0;
  std::string signature_scheme = "hmac-sha256";
  Secret key;  // empty: messages are not signed
  std::optional<CurveKeys> curve;
  // The notebook, as a Jupyter server that writes it says (its "jupyter_session", often the
  // notebook's path); empty when the file does not say.
  std::string jupyter_session;
  // The kernelspec the kernel was started from, as jupyter_client writes it ("kernel_name");
  // empty when the file does not say.
  std::string kernel_name;

  // Where to connect for `port`: "tcp://127.0.0.1:53794", "tcp://[::1]:53794",
  // "ipc:///run/user/1000/kernel-ab12-3" (jupyter_client's ipc naming: ip-port).
  [[nodiscard]] std::string endpoint(int port) const;
  [[nodiscard]] bool ipv6() const;
  // 0 is what a file says before the kernel has chosen its ports.
  [[nodiscard]] bool ports_known() const { return iopub_port > 0 && hb_port > 0; }
  [[nodiscard]] std::string_view transport_name() const;
};

// Parses connection-file JSON. Throws ConnectionFileError naming the field and what was
// wrong with it.
ConnectionInfo parse_connection_info(std::string_view json_text);
// Reads and parses; the error starts with the path.
ConnectionInfo load_connection_file(const std::filesystem::path& path);

}  // namespace kwd::protocol
