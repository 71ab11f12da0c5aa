#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kwd::daemon {

// What a running Jupyter server says of itself in its runtime dir (jupyter_server's
// jpserver-PID.json, the classic notebook server's nbserver-PID.json).
struct JupyterServer {
  std::string host;
  int port = 0;
  std::string base_url = "/";
  std::string token;  // used for the request, never logged or written anywhere
  int pid = 0;
};

// A jpserver-PID.json's content, when it describes a server we can ask over plain HTTP
// (not https, not a unix socket); nullopt otherwise.
std::optional<JupyterServer> parse_server_info(const std::string& text);

// kernel id -> notebook path, from a GET /api/sessions answer (jupyter_server, and the
// classic notebook server's older shape with notebook.path).
std::map<std::string, std::string> parse_sessions(const std::string& text);

// The notebook of a kernel that neither its connection file (jupyter_session) nor its
// environment (JPY_SESSION_NAME) names: the Jupyter servers of this user listed in the
// runtime dirs are asked for their sessions. A server's answers are remembered; an unknown
// kernel id makes it ask again at most every `min_interval_ms`, so a kernel whose session
// is recorded a moment after it starts is named on a later look.
class JupyterSessions {
 public:
  explicit JupyterSessions(std::vector<std::filesystem::path> runtime_dirs,
                           std::int64_t min_interval_ms = 2000);

  // "" when no running server knows the kernel (or none runs). `now`: ask whatever the
  // interval (a death report is about to be written).
  std::string notebook_of(const std::string& kernel_id, bool now = false);

 private:
  void ask_servers();

  std::vector<std::filesystem::path> dirs_;
  std::int64_t min_interval_ms_;
  std::int64_t last_asked_ms_ = -1;
  std::map<std::string, std::string> known_;
  std::map<std::string, std::string> said_;  // server file -> the problem logged once
};

}  // namespace kwd::daemon
