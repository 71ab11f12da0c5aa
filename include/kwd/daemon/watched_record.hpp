#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::daemon {

// The kernels the daemon watches, kept on disk in its store (a dot-file, which the store's
// listing leaves out): a daemon that was killed
// (SIGKILL, an OOM kill, a crash of its own) reads it when started again, to tell which
// kernels ended while nobody watched them. Rewritten when the set changes, never per sample,
// and its time touched every minute (the daemon was alive then); removed when the daemon stops
// of its own will (watching then ends on purpose).
struct WatchedEntry {
  pid_t pid = -1;
  std::uint64_t start_time = 0;  // with the pid: this process, not a later one
  std::int64_t started_at_ms = -1;
  std::int64_t watched_since_ms = 0;
  std::string kernel_id;
  std::string connection_file;
  std::string notebook;
  std::string kernel_name;
  std::string report_dir;     // as report_dir_for said it
  bool in_container = false;  // its connection file's path is in its container's root
  std::vector<std::string> argv;
};

struct WatchedRecord {
  std::int64_t written_ms = 0;  // the daemon's last change of it: it was alive then
  std::int64_t touched_ms = 0;  // the file's time when read (the daemon's last minute alive)
  pid_t daemon_pid = -1;
  std::string boot_id;  // platform::boot_id(): pids and process starts mean nothing across boots
  std::vector<WatchedEntry> kernels;
};

std::string to_text(const WatchedRecord& record);
// nullopt when the text is not such a record (a damaged file is read as none).
std::optional<WatchedRecord> parse_watched_record(std::string_view text);

// The record's file in a private directory of the daemon's (made 0700 when missing).
class WatchedRecordFile {
 public:
  explicit WatchedRecordFile(std::filesystem::path dir) : dir_(std::move(dir)) {}
  // Atomic, not synced: it has to outlive the daemon, not the machine. Throws
  // util::FileError.
  void write(const WatchedRecord& record) const;
  // nullopt when there is none, or it cannot be read or parsed.
  [[nodiscard]] std::optional<WatchedRecord> read() const;
  void remove() const noexcept;
  // Its time set to now: the daemon is alive. Nothing when there is no record yet.
  void touch() const noexcept;
  [[nodiscard]] std::filesystem::path path() const { return dir_ / kName; }

 private:
  // No ".json": whoever reads the store's *.json as reports (the Python package) skips it.
  static constexpr const char* kName = ".daemon-watched";
  std::filesystem::path dir_;
};

}  // namespace kwd::daemon
