#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "kwd/platform/descriptors.hpp"
#include "kwd/smoke/notebook_run.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/errno_text.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/unique_fd.hpp"

// The first phase of a notebook run: a connection file of ours, the kernel started under
// watch with it, a client connected, and both the shell and IOPub seen to answer.

namespace kwd::smoke {
namespace {

// Output of a notebook may be large (a 50 MB image in one display_data); the watchdog's
// own listener keeps its tighter caps.
protocol::WireLimits client_limits() {
  protocol::WireLimits limits;
  limits.max_frame_bytes = 512u << 20;
  limits.max_message_bytes = 1024u << 20;
  return limits;
}

// Free TCP ports on the loopback, chosen as jupyter_client does (bind to port 0, read it,
// close); all are held until all are chosen so that none is chosen twice.
std::vector<int> free_loopback_ports(std::size_t count) {
  std::vector<util::UniqueFd> held;
  std::vector<int> ports;
  for (std::size_t i = 0; i < count; ++i) {
    util::UniqueFd fd(platform::cloexec_socket(AF_INET, SOCK_STREAM));
    if (!fd)
      throw std::runtime_error(util::cannot("create", "a socket to find a free port", errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("cannot find a free port on 127.0.0.1");
    ports.push_back(ntohs(addr.sin_port));
    held.push_back(std::move(fd));
  }
  return ports;
}

// `python -m ipykernel_launcher` (or `-m ipykernel`), as kernelspecs have it: IPython's
// options apply. A kernel started otherwise may reject an option it does not know.
bool runs_ipykernel(const std::vector<std::string>& argv) {
  for (std::size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == "-m" && (argv[i + 1] == "ipykernel_launcher" || argv[i + 1] == "ipykernel"))
      return true;
  return false;
}

}  // namespace

std::vector<std::string> NotebookRun::kernel_argv(const std::string& connection_file) const {
  std::vector<std::string> argv;
  for (const auto& a : spec_.spec["argv"])
    if (a.is_string()) argv.push_back(a.get<std::string>());
  // A spec made by `kernelspec wrap` already runs under `kernel-watchdog run --`: this run
  // watches the kernel itself, so only the kernel's own command is used.
  if (spec_.wrapped())
    if (const auto dashes = std::find(argv.begin(), argv.end(), "--"); dashes != argv.end())
      argv.erase(argv.begin(), dashes + 1);
  for (auto& a : argv) {
    for (const auto& [field, value] :
         {std::pair<std::string, std::string>{"{connection_file}", connection_file},
          {"{resource_dir}", spec_.dir.string()}}) {
      for (auto at = a.find(field); at != std::string::npos; at = a.find(field, at + value.size()))
        a.replace(at, field.size(), value);
    }
  }
  if (!options_.ipython_history.empty() && runs_ipykernel(argv) &&
      std::none_of(argv.begin(), argv.end(), [](const std::string& a) {
        return a.starts_with("--HistoryManager.hist_file");
      }))
    argv.push_back("--HistoryManager.hist_file=" + options_.ipython_history);
  return argv;
}

void NotebookRun::prepare_connection() {
  // The connection file holds the key: a directory of ours with a random name, created
  // relative to the shared one's descriptor; removed when the run ends.
  temp_dir_.emplace(util::SafeDir::open(util::shared_temp_dir()));
  run_dir_.emplace(
      temp_dir_->make_unique_dir(std::string(kRunDirPrefix) + std::to_string(::getpid()) + "-"));
  const auto ports = free_loopback_ports(5);
  connection_.transport = protocol::Transport::tcp;
  connection_.ip = "127.0.0.1";
  connection_.shell_port = ports[0];
  connection_.iopub_port = ports[1];
  connection_.stdin_port = ports[2];
  connection_.control_port = ports[3];
  connection_.hb_port = ports[4];
  connection_.signature_scheme = "hmac-sha256";
  connection_.key = protocol::Secret(util::random_name(48));
  const std::string kernel_id = util::random_name(12);
  nlohmann::json file = {
      {"shell_port", ports[0]},    {"iopub_port", ports[1]},
      {"stdin_port", ports[2]},    {"control_port", ports[3]},
      {"hb_port", ports[4]},       {"ip", connection_.ip},
      {"transport", "tcp"},        {"signature_scheme", "hmac-sha256"},
      {"kernel_name", spec_.name}, {"key", std::string(connection_.key.reveal())}};
  connection_file_ = run_dir_
                         ->write_file("kernel-" + kernel_id + ".json", file.dump(), 0600,
                                      util::Replace::kAllowed, util::Durability::kAtomicOnly)
                         .string();
}

void NotebookRun::never_started(const std::string& why) {
  result_.outcome = Outcome::died;
  result_.cause = "kernel_start_failed";
  result_.headline = why;
  mark_rest_not_run("the kernel never started");
  finish();
}

void NotebookRun::start() {
  started_ns_ = util::steady_ns();
  launch::KernelLaunch launch;
  try {
    prepare_connection();
    launch.argv = kernel_argv(connection_file_);
  } catch (const std::exception& e) {
    never_started(std::string("could not prepare the kernel's connection: ") + e.what());
    return;
  }
  launch.connection_file = connection_file_;
  launch.mode = "smoke";
  launch.working_dir =
      (options_.cwd.empty() ? std::filesystem::absolute(notebook_.path).parent_path()
                            : options_.cwd)
          .string();
  launch.passthrough = false;
  launch.own_process_group = true;
  launch.memory_limit = options_.memory_limit;
  launch.thrash_timeout = std::chrono::seconds(options_.thrash_timeout_s);
  launch.nvml_library = options_.nvml_library;
  launch.host_sources = host_sources_;
  launch.faulthandler = options_.faulthandler;
  // One IOPub subscription: this client's; the watch gets every message from it.
  launch.listener.client_iopub_drain = [this](std::chrono::milliseconds quiet,
                                              std::chrono::milliseconds budget) {
    draining_ = true;
    if (client_) client_->drain_iopub(quiet, budget);
  };
  launch.listener.client_iopub_dropped = [this]() -> const protocol::DropCounts* {
    return client_ ? &client_->drops() : nullptr;
  };
  if (spec_.spec.contains("env") && spec_.spec["env"].is_object())
    for (const auto& [name, value] : spec_.spec["env"].items())
      if (value.is_string())
        launch.extra_environment.push_back(name + "=" + value.get<std::string>());
  for (const auto& entry : environment_) {
    const auto name = entry.substr(0, entry.find('=') + 1);
    std::erase_if(launch.extra_environment,
                  [&](const std::string& e) { return e.starts_with(name); });
    launch.extra_environment.push_back(entry);
  }
  kernel_ = std::make_unique<launch::WatchedKernel>(loop_, std::move(launch));
  try {
    kernel_->start(
        [this](const watch::ProcessEnd& end, std::int64_t at) { on_kernel_death(end, at); },
        [this](const protocol::HangEvidence&) { on_hang(); });
  } catch (const std::exception& e) {
    never_started(std::string("the kernel could not be started: ") + e.what());
    return;
  }
  try {
    client_ = std::make_unique<client::KernelClient>(
        zmq_, loop_, connection_, client_limits(),
        [this](client::Channel channel, protocol::Message& m) { on_message(channel, m); });
  } catch (const std::exception& e) {
    kernel_failed(std::string("the watchdog could not connect to the kernel: ") + e.what(), nullptr,
                  util::wall_ms());
    return;
  }
  client_->send(client::Channel::shell, "kernel_info_request", nlohmann::json::object());
  deadline_ = loop_.after(
      std::chrono::milliseconds(static_cast<long>(options_.startup_timeout_s * 1000)), [this] {
        deadline_.reset();
        kernel_failed("the kernel did not answer within the " +
                          format_seconds(options_.startup_timeout_s) + " startup timeout",
                      nullptr, util::wall_ms());
      });
  peaks_timer_ = loop_.every(std::chrono::milliseconds(100), [this] {
    sample_peaks();
    end_a_kernel_stuck_after_a_lost_port();
  });
}

void NotebookRun::on_kernel_info_reply() {
  // The reply says shell works; IOPub is connected once something came through it (its
  // busy/idle around the request). Until then, ask again: a SUB socket that joined late
  // missed them, and would miss the first cell's outputs the same way.
  if (!iopub_seen_) {
    if (!retry_)
      retry_ = loop_.after(std::chrono::milliseconds(100), [this] {
        retry_.reset();
        if (state_ == State::starting)
          client_->send(client::Channel::shell, "kernel_info_request", nlohmann::json::object());
      });
    return;
  }
  if (deadline_) loop_.cancel(*deadline_);
  deadline_.reset();
  state_ = State::running;
  next_cell();
}

}  // namespace kwd::smoke
