#include "kwd/launch/live_status_file.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/watch/live_status.hpp"

namespace kwd::launch {

LiveStatusFile::LiveStatusFile(const std::string& connection_file) {
  if (connection_file.empty()) return;
  kernel_id_ = protocol::kernel_id_from_connection_file(connection_file);
  if (kernel_id_.empty() || kernel_id_.find('/') != std::string::npos ||
      kernel_id_.starts_with("."))
    return;
  name_ = kernel_id_ + ".json";
  try {
    dir_ = util::SafeDir::open_private(watch::live_status_dir());
  } catch (const std::exception& e) {
    spdlog::debug("no live status file: {}", e.what());
  }
}

void LiveStatusFile::refresh(const watch::Watch& watch, pid_t kernel_pid) {
  if (!dir_) return;
  nlohmann::json doc = {{"kernel_id", kernel_id_},
                        {"watched_by", "launcher"},
                        {"watchdog_pid", ::getpid()},
                        {"pid", kernel_pid},
                        {"state", watch::execution_state(watch)},
                        {"started_at_ms", watch.started_at_ms()},
                        {"updated_at_ms", util::wall_ms()}};
  doc.update(watch::live_memory(watch));
  try {
    dir_->write_file(name_, doc.dump() + "\n", 0600, util::Replace::kAllowed,
                     util::Durability::kAtomicOnly);
    failed_ = false;
  } catch (const std::exception& e) {
    if (!failed_) spdlog::warn("live status file not written: {}", e.what());
    failed_ = true;
  }
}

void LiveStatusFile::remove() noexcept {
  if (dir_) ::unlinkat(dir_->fd(), name_.c_str(), 0);
}

}  // namespace kwd::launch
