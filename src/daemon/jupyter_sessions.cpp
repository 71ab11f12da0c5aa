#include "kwd/daemon/jupyter_sessions.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "kwd/http/module.hpp"
#include "kwd/platform/regular_file.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/process_exists.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::daemon {
namespace fs = std::filesystem;
namespace {

constexpr std::size_t kMaxServerFile = 64 * 1024;
constexpr int kRequestTimeoutMs = 300;  // a local server answers in milliseconds

// This user's regular file, small; a FIFO or another user's file is never read.
std::optional<std::string> read_own_file(const fs::path& path) {
  const auto file = platform::open_regular_file(AT_FDCWD, path.c_str(), O_NOFOLLOW);
  if (!file.fd || file.st.st_uid != ::geteuid() ||
      file.st.st_size > static_cast<off_t>(kMaxServerFile))
    return std::nullopt;
  return platform::read_up_to(file.fd.get(), kMaxServerFile);
}

std::string text_at(const nlohmann::json& doc, const char* key) {
  const auto it = doc.find(key);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::optional<JupyterServer> parse_server_info(const std::string& text) {
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object()) return std::nullopt;
  JupyterServer server;
  server.token = text_at(doc, "token");
  if (const auto base = text_at(doc, "base_url"); !base.empty()) server.base_url = base;
  if (server.base_url.back() != '/') server.base_url += '/';
  if (const auto pid = doc.find("pid"); pid != doc.end() && pid->is_number_integer())
    server.pid = pid->get<int>();
  // "url" says how it is reached: http://HOST:PORT/BASE; a server on a unix socket ("sock")
  // or behind TLS is not asked (we would not check its certificate).
  const std::string url = text_at(doc, "url");
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme) || !text_at(doc, "sock").empty()) return std::nullopt;
  const std::string rest = url.substr(kScheme.size());
  const std::string authority = rest.substr(0, rest.find('/'));
  std::string host = authority;
  server.port = 80;
  if (const auto colon = authority.rfind(':');
      colon != std::string::npos && authority.find(']', colon) == std::string::npos) {
    host = authority.substr(0, colon);
    int port = 0;
    const auto* first = authority.data() + colon + 1;
    const auto* last = authority.data() + authority.size();
    if (std::from_chars(first, last, port).ec != std::errc() || port <= 0 || port > 65535)
      return std::nullopt;
    server.port = port;
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) return std::nullopt;
  server.host = host;
  return server;
}

std::map<std::string, std::string> parse_sessions(const std::string& text) {
  std::map<std::string, std::string> out;
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_array()) return out;
  for (const auto& session : doc) {
    if (!session.is_object()) continue;
    const auto kernel = session.find("kernel");
    if (kernel == session.end() || !kernel->is_object()) continue;
    const std::string id = text_at(*kernel, "id");
    std::string path = text_at(session, "path");
    if (path.empty())
      if (const auto nb = session.find("notebook"); nb != session.end() && nb->is_object())
        path = text_at(*nb, "path");
    if (!id.empty() && !path.empty()) out[id] = path;
  }
  return out;
}

JupyterSessions::JupyterSessions(std::vector<fs::path> runtime_dirs, std::int64_t min_interval_ms)
    : dirs_(std::move(runtime_dirs)), min_interval_ms_(min_interval_ms) {}

std::string JupyterSessions::notebook_of(const std::string& kernel_id, bool now) {
  if (kernel_id.empty()) return "";
  if (const auto it = known_.find(kernel_id); it != known_.end()) return it->second;
  const std::int64_t t = util::steady_ms();
  if (!now && last_asked_ms_ >= 0 && t - last_asked_ms_ < min_interval_ms_) return "";
  last_asked_ms_ = t;
  ask_servers();
  const auto it = known_.find(kernel_id);
  return it != known_.end() ? it->second : "";
}

void JupyterSessions::ask_servers() {
  // What the servers say now replaces what they said before (a daemon that runs for months
  // keeps only the sessions that exist), unless none of them answered.
  std::map<std::string, std::string> fresh;
  bool answered = false;
  for (const auto& dir : dirs_) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      // jupyter_server's jpserver-PID.json; the classic notebook server's nbserver-PID.json.
      if (!(name.starts_with("jpserver-") || name.starts_with("nbserver-")) ||
          !name.ends_with(".json"))
        continue;
      const auto text = read_own_file(entry.path());
      const auto server = text ? parse_server_info(*text) : std::nullopt;
      if (!server || (server->pid > 0 && !util::process_exists(server->pid))) continue;
      const auto answer =
          // no_track_activity: a daemon's look must not keep the server from counting as
          // idle (its shutdown_no_activity_timeout, JupyterHub's culler).
          http::get(server->host, server->port,
                    server->base_url + "api/sessions?no_track_activity=1",
                    server->token.empty() ? "" : "token " + server->token, kRequestTimeoutMs);
      std::string problem;
      if (answer.status < 0)
        problem = answer.error;
      else if (answer.status != 200)
        problem = "HTTP " + std::to_string(answer.status);
      if (!problem.empty()) {
        // Once per server and problem; the reason names no token.
        if (said_[entry.path().string()] != problem)
          spdlog::info("the Jupyter server of {} did not list its sessions: {}",
                       entry.path().string(), problem);
        said_[entry.path().string()] = problem;
        continue;
      }
      said_.erase(entry.path().string());
      answered = true;
      fresh.merge(parse_sessions(answer.body));
    }
  }
  if (answered) known_ = std::move(fresh);
}

}  // namespace kwd::daemon
