#include <unistd.h>
#include <zmq.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kwd/protocol/connection_file.hpp"

using kwd::protocol::ConnectionFileError;
using kwd::protocol::parse_connection_info;
using kwd::protocol::Transport;

namespace {

const std::string kConnectionKey = "5ecre7-k3y-7hat-must-never-show-1234";

std::string file_with(const std::string& fields) {
  return R"({"shell_port": 50001, "iopub_port": 50002, "stdin_port": 50003, "control_port": 50004,
  "hb_port": 50005, "ip": "127.0.0.1", "key": ")" +
         kConnectionKey +
         R"(", "transport": "tcp", "signature_scheme": "hmac-sha256", "kernel_name": "python3")" +
         fields + "}";
}

std::string error_of(const std::string& text) {
  try {
    (void)parse_connection_info(text);
  } catch (const ConnectionFileError& e) {
    return e.what();
  }
  return "";
}

struct CurvePair {
  std::string public_key, secret_key;
};

CurvePair make_curve_pair() {
  std::array<char, 41> pub{}, sec{};
  REQUIRE(zmq_curve_keypair(pub.data(), sec.data()) == 0);
  return {std::string(pub.data(), 40), std::string(sec.data(), 40)};
}

}  // namespace

TEST_CASE("a jupyter_client connection file is read") {
  const auto info = parse_connection_info(file_with(""));
  CHECK(info.transport == Transport::tcp);
  CHECK(info.ip == "127.0.0.1");
  CHECK(info.iopub_port == 50002);
  CHECK(info.hb_port == 50005);
  CHECK(info.shell_port == 50001);
  CHECK(info.control_port == 50004);
  CHECK(info.signature_scheme == "hmac-sha256");
  CHECK(info.key.reveal() == kConnectionKey);
  CHECK_FALSE(info.curve.has_value());
  CHECK(info.ports_known());
  CHECK(info.endpoint(info.iopub_port) == "tcp://127.0.0.1:50002");
  CHECK(info.kernel_name == "python3");
  CHECK(info.jupyter_session.empty());
  CHECK(
      parse_connection_info(file_with(R"(, "jupyter_session": "work/a.ipynb")")).jupyter_session ==
      "work/a.ipynb");
}

TEST_CASE("defaults, wildcard addresses, IPv6 and ipc endpoints") {
  auto info = parse_connection_info(R"({"iopub_port": 1, "hb_port": 2})");
  CHECK(info.transport == Transport::tcp);
  CHECK(info.signature_scheme == "hmac-sha256");
  CHECK(info.key.empty());
  CHECK(info.ip == "127.0.0.1");

  info = parse_connection_info(R"({"iopub_port": 1, "hb_port": 2, "ip": "0.0.0.0"})");
  CHECK(info.endpoint(1) == "tcp://127.0.0.1:1");

  info = parse_connection_info(R"({"iopub_port": 1, "hb_port": 2, "ip": "::"})");
  CHECK(info.ipv6());
  CHECK(info.endpoint(1) == "tcp://[::1]:1");

  info = parse_connection_info(
      R"({"iopub_port": 3, "hb_port": 4, "ip": "/run/user/1000/kernel-ab12", "transport": "ipc"})");
  CHECK(info.transport == Transport::ipc);
  CHECK_FALSE(info.ipv6());
  CHECK(info.endpoint(3) == "ipc:///run/user/1000/kernel-ab12-3");

  // Ports not chosen yet: readable, but not usable.
  info = parse_connection_info(R"({"iopub_port": 0, "hb_port": 0})");
  CHECK_FALSE(info.ports_known());
}

TEST_CASE("problems name the field and what is wrong with it") {
  CHECK(error_of(R"({"hb_port": 2})") == "field 'iopub_port': missing");
  CHECK(error_of(R"({"iopub_port": 1})") == "field 'hb_port': missing");
  CHECK(error_of(R"({"iopub_port": "1", "hb_port": 2})") ==
        "field 'iopub_port': must be an integer port number, not string");
  CHECK(error_of(R"({"iopub_port": 70000, "hb_port": 2})") ==
        "field 'iopub_port': port 70000 is outside 0-65535");
  CHECK(error_of(R"({"iopub_port": 1, "hb_port": 2, "shell_port": -3})") ==
        "field 'shell_port': port -3 is outside 0-65535");
  CHECK(error_of(R"({"iopub_port": 1, "hb_port": 2, "transport": "udp"})") ==
        "field 'transport': 'udp' is neither tcp nor ipc");
  CHECK(error_of(R"({"iopub_port": 1, "hb_port": 2, "signature_scheme": "hmac-nosuch"})") ==
        "field 'signature_scheme': 'hmac-nosuch': this OpenSSL has no hash 'nosuch'");
  CHECK(error_of(R"({"iopub_port": 1, "hb_port": 2, "key": 42})") ==
        "field 'key': must be a string, not number");
  CHECK(error_of("[1, 2]") == "not a JSON object but array");
  CHECK(error_of(R"({"iopub_port": 1,)").starts_with("not valid JSON (syntax error near byte"));
  CHECK(error_of(R"({"iopub_port": 1, "hb_port": 2, "ip": "", "transport": "ipc"})") ==
        "field 'ip': empty, but ipc needs a socket path prefix");
}

TEST_CASE("the key never appears in an error, whatever is wrong") {
  const std::vector<std::string> broken{
      // JSON broken right after the key: nlohmann's own message would quote it.
      R"({"iopub_port": 1, "hb_port": 2, "key": ")" + kConnectionKey + R"(" "oops"})",
      R"({"iopub_port": 1, "hb_port": 2, "key": ")" + kConnectionKey,
      R"({"key": ")" + kConnectionKey + R"(", "iopub_port": 1 "hb_port": 2})",
      R"({"key": ")" + kConnectionKey + R"(", "hb_port": 2})",
      R"({"key": ")" + kConnectionKey +
          R"(", "iopub_port": 1, "hb_port": 2, "signature_scheme": "hmac-)" + kConnectionKey +
          R"("})",
      R"({"key": [")" + kConnectionKey + R"("], "iopub_port": 1, "hb_port": 2})",
      R"({"key": ")" + kConnectionKey +
          R"(", "iopub_port": 1, "hb_port": 2, "curve_secretkey": ")" + kConnectionKey + R"("})",
  };
  for (const auto& text : broken) {
    const std::string what = error_of(text);
    INFO(what);
    CHECK_FALSE(what.empty());
    // Neither the key nor a good part of it.
    CHECK(what.find(kConnectionKey) == std::string::npos);
    CHECK(what.find(kConnectionKey.substr(0, 12)) == std::string::npos);
    CHECK(what.find(kConnectionKey.substr(kConnectionKey.size() - 12)) == std::string::npos);
  }
}

// Found by tests/fuzz/fuzz_connection_file.cpp: nlohmann throws out_of_range, not
// parse_error, for a number no double holds, and that escaped as another exception.
TEST_CASE("a number too large for a double is a connection-file error") {
  CHECK(error_of(R"({"iopub_port": 1e400, "hb_port": 2})") ==
        "not valid JSON (a number out of range)");
}

// A key that is part of the redaction mark used to be found again inside each mark put in
// its place, for ever.
TEST_CASE("redaction ends when the key is part of the mark") {
  CHECK(error_of(R"({"iopub_port": 1, "hb_port": 2, "key": "e", "transport": "ethernet"})") ==
        "fi<secret>ld 'transport': '<secret>th<secret>rn<secret>t' is n<secret>ith<secret>r tcp "
        "nor ipc");
  CHECK(
      error_of(R"({"iopub_port": 1, "hb_port": 2, "key": "<secret>", "transport": "<secret>"})") ==
      "field 'transport': '<secret>' is neither tcp nor ipc");
}

TEST_CASE("CurveZMQ keys are read and checked") {
  const auto pair = make_curve_pair();
  auto info =
      parse_connection_info(file_with(R"(, "curve_publickey": ")" + pair.public_key +
                                      R"(", "curve_secretkey": ")" + pair.secret_key + R"(")"));
  REQUIRE(info.curve.has_value());
  CHECK(info.curve->server_public == pair.public_key);
  CHECK(info.curve->secret.reveal() == pair.secret_key);

  info = parse_connection_info(file_with(R"(, "curve_publickey": ")" + pair.public_key + R"(")"));
  REQUIRE(info.curve.has_value());
  CHECK(info.curve->secret.empty());

  const auto other = make_curve_pair();
  const std::string mismatch =
      error_of(file_with(R"(, "curve_publickey": ")" + other.public_key +
                         R"(", "curve_secretkey": ")" + pair.secret_key + R"(")"));
  CHECK(mismatch == "field 'curve_publickey': does not belong to curve_secretkey");
  CHECK(mismatch.find(pair.secret_key) == std::string::npos);

  CHECK(error_of(file_with(R"(, "curve_publickey": "short")")) ==
        "field 'curve_publickey': must be a 40-character Z85 CurveZMQ key");
  const std::string bad_secret = error_of(
      file_with(R"(, "curve_publickey": ")" + pair.public_key + R"(", "curve_secretkey": "xx")"));
  CHECK(bad_secret == "field 'curve_secretkey': must be a 40-character Z85 CurveZMQ key");
  CHECK(error_of(file_with(R"(, "curve_secretkey": ")" + pair.secret_key + R"(")")) ==
        "field 'curve_publickey': missing while curve_secretkey is given");
}

TEST_CASE("load_connection_file names the path") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("kwd-test-cf-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto good = dir / "kernel-1.json";
  std::ofstream(good) << file_with("");
  CHECK(kwd::protocol::load_connection_file(good).iopub_port == 50002);

  const auto bad = dir / "kernel-2.json";
  std::ofstream(bad) << R"({"key": ")" << kConnectionKey << R"(", "hb_port": 1})";
  try {
    (void)kwd::protocol::load_connection_file(bad);
    FAIL("accepted a file without iopub_port");
  } catch (const ConnectionFileError& e) {
    const std::string what = e.what();
    CHECK(what == bad.string() + ": field 'iopub_port': missing");
  }
  try {
    (void)kwd::protocol::load_connection_file(dir / "missing.json");
    FAIL("read a missing file");
  } catch (const ConnectionFileError& e) {
    CHECK(std::string(e.what()).find("missing.json: cannot read") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}
