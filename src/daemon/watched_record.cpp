#include "kwd/daemon/watched_record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "kwd/platform/file_time.hpp"
#include "kwd/platform/regular_file.hpp"
#include "kwd/util/private_files.hpp"

namespace kwd::daemon {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxRecordBytes = 16u << 20;  // thousands of kernels, with their argv

}  // namespace

std::string to_text(const WatchedRecord& record) {
  json kernels = json::array();
  for (const auto& k : record.kernels)
    kernels.push_back({{"pid", k.pid},
                       {"start_time", k.start_time},
                       {"started_at_ms", k.started_at_ms},
                       {"watched_since_ms", k.watched_since_ms},
                       {"kernel_id", k.kernel_id},
                       {"connection_file", k.connection_file},
                       {"notebook", k.notebook},
                       {"kernel_name", k.kernel_name},
                       {"report_dir", k.report_dir},
                       {"in_container", k.in_container},
                       {"argv", k.argv}});
  return json{{"written_ms", record.written_ms},
              {"daemon_pid", record.daemon_pid},
              {"boot_id", record.boot_id},
              {"kernels", std::move(kernels)}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<WatchedRecord> parse_watched_record(std::string_view text) {
  const json doc = json::parse(text, nullptr, false);
  if (!doc.is_object() || !doc.contains("kernels") || !doc["kernels"].is_array())
    return std::nullopt;
  WatchedRecord out;
  try {
    out.written_ms = doc.value("written_ms", std::int64_t{0});
    out.daemon_pid = doc.value("daemon_pid", -1);
    out.boot_id = doc.value("boot_id", std::string());
    for (const auto& k : doc["kernels"]) {
      WatchedEntry e;
      e.pid = k.at("pid").get<pid_t>();
      e.start_time = k.at("start_time").get<std::uint64_t>();
      e.started_at_ms = k.value("started_at_ms", std::int64_t{-1});
      e.watched_since_ms = k.value("watched_since_ms", std::int64_t{0});
      e.kernel_id = k.value("kernel_id", std::string());
      e.connection_file = k.value("connection_file", std::string());
      e.notebook = k.value("notebook", std::string());
      e.kernel_name = k.value("kernel_name", std::string());
      e.report_dir = k.value("report_dir", std::string());
      e.in_container = k.value("in_container", false);
      e.argv = k.value("argv", std::vector<std::string>());
      if (e.pid > 0) out.kernels.push_back(std::move(e));
    }
  } catch (const json::exception&) {
    return std::nullopt;
  }
  return out;
}

void WatchedRecordFile::write(const WatchedRecord& record) const {
  util::SafeDir::open_private(dir_).write_file(
      kName, to_text(record), 0600, util::Replace::kAllowed, util::Durability::kAtomicOnly);
}

std::optional<WatchedRecord> WatchedRecordFile::read() const {
  try {
    const auto dir = util::SafeDir::open(dir_);
    auto file = platform::open_regular_file(dir.fd(), kName, O_NOFOLLOW);
    if (!file.fd || file.st.st_uid != ::geteuid()) return std::nullopt;
    const auto text = platform::read_up_to(file.fd.get(), kMaxRecordBytes);
    if (!text) return std::nullopt;
    auto record = parse_watched_record(*text);
    if (record) record->touched_ms = platform::modified_ms(file.st);
    return record;
  } catch (const util::FileError&) {
    return std::nullopt;
  }
}

void WatchedRecordFile::touch() const noexcept {
  try {
    ::utimensat(util::SafeDir::open(dir_).fd(), kName, nullptr, AT_SYMLINK_NOFOLLOW);
  } catch (...) {
  }
}

void WatchedRecordFile::remove() const noexcept {
  try {
    ::unlinkat(util::SafeDir::open(dir_).fd(), kName, 0);
  } catch (...) {
  }
}

}  // namespace kwd::daemon
