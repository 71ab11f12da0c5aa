#include "kwd/watch/flight_record.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace kwd::watch {
namespace {

using nlohmann::json;

json optional_number(const std::optional<std::int64_t>& n) {
  return n ? json(*n) : json(nullptr);
}

}  // namespace

std::string to_text(const FlightRecord& r) {
  return json{{"token", r.token},
              {"host", r.host},
              {"pid_namespace", r.pid_namespace},
              {"end_requested", r.end_requested},
              {"watchdog_pid", r.watchdog_pid},
              {"watchdog_start_time", r.watchdog_start_time},
              {"kernel_pid", r.kernel_pid},
              {"kernel_start_time", r.kernel_start_time},
              {"boot_id", r.boot_id},
              {"kernel_started_at_ms", r.kernel_started_at_ms},
              {"written_at_ms", r.written_at_ms},
              {"kernel_id", r.kernel_id},
              {"connection_file", r.connection_file},
              {"notebook", r.notebook},
              {"argv", r.argv},
              {"state", r.state},
              {"cell",
               {{"execution_count", r.cell_execution_count},
                {"code", r.cell_code},
                {"started_at_ms", r.cell_started_at_ms}}},
              {"memory",
               {{"sampled_at_ms", r.sampled_at_ms},
                {"rss", r.rss},
                {"cgroup_usage", r.cgroup_usage},
                {"cgroup_limit", r.cgroup_limit},
                {"mem_total", r.mem_total},
                {"gpu_used", r.gpu_used}}},
              {"memory_cgroup",
               {{"dir", r.memory_cgroup_dir},
                {"inode", r.memory_cgroup_inode},
                {"version", r.memory_cgroup_version},
                {"oom_kills", optional_number(r.cgroup_oom_kills)}}}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<FlightRecord> parse_flight_record(std::string_view text) {
  const json doc = json::parse(text, nullptr, false);
  if (!doc.is_object()) return std::nullopt;
  FlightRecord r;
  try {
    r.token = doc.value("token", std::string());
    r.host = doc.value("host", std::string());
    r.pid_namespace = doc.value("pid_namespace", std::uint64_t{0});
    r.end_requested = doc.value("end_requested", false);
    r.watchdog_pid = doc.at("watchdog_pid").get<pid_t>();
    r.watchdog_start_time = doc.at("watchdog_start_time").get<std::uint64_t>();
    r.kernel_pid = doc.at("kernel_pid").get<pid_t>();
    r.kernel_start_time = doc.at("kernel_start_time").get<std::uint64_t>();
    r.boot_id = doc.value("boot_id", std::string());
    r.kernel_started_at_ms = doc.value("kernel_started_at_ms", std::int64_t{0});
    r.written_at_ms = doc.value("written_at_ms", std::int64_t{0});
    r.kernel_id = doc.value("kernel_id", std::string());
    r.connection_file = doc.value("connection_file", std::string());
    r.notebook = doc.value("notebook", std::string());
    r.argv = doc.value("argv", std::vector<std::string>());
    r.state = doc.value("state", std::string());
    if (const auto cell = doc.find("cell"); cell != doc.end() && cell->is_object()) {
      r.cell_execution_count = cell->value("execution_count", std::int64_t{-1});
      r.cell_code = cell->value("code", std::string());
      r.cell_started_at_ms = cell->value("started_at_ms", std::int64_t{-1});
    }
    if (const auto m = doc.find("memory"); m != doc.end() && m->is_object()) {
      r.sampled_at_ms = m->value("sampled_at_ms", std::int64_t{0});
      r.rss = m->value("rss", timeline::kUnknown);
      r.cgroup_usage = m->value("cgroup_usage", timeline::kUnknown);
      r.cgroup_limit = m->value("cgroup_limit", timeline::kUnknown);
      r.mem_total = m->value("mem_total", timeline::kUnknown);
      r.gpu_used = m->value("gpu_used", timeline::kUnknown);
    }
    if (const auto c = doc.find("memory_cgroup"); c != doc.end() && c->is_object()) {
      r.memory_cgroup_dir = c->value("dir", std::string());
      r.memory_cgroup_inode = c->value("inode", std::uint64_t{0});
      r.memory_cgroup_version = c->value("version", 0);
      if (const auto n = c->find("oom_kills"); n != c->end() && n->is_number_integer())
        r.cgroup_oom_kills = n->get<std::int64_t>();
    }
  } catch (const json::exception&) {
    return std::nullopt;
  }
  // A record without its token has no lock to tell whether its watchdog lives.
  if (r.watchdog_pid <= 0 || r.kernel_pid <= 0 || r.token.empty()) return std::nullopt;
  return r;
}

int memory_step(const FlightRecord& r) {
  std::int64_t used = timeline::kUnknown;
  std::int64_t limit = timeline::kUnknown;
  if (r.cgroup_limit > 0) {
    limit = r.cgroup_limit;
    used = r.cgroup_usage >= 0 ? r.cgroup_usage : r.rss;
  } else if (r.mem_total > 0) {
    limit = r.mem_total;
    used = r.rss;
  }
  if (limit <= 0 || used < 0) return -1;
  const std::int64_t percent = used * 100 / limit;
  if (percent < 50) return 0;
  if (percent < 90) return static_cast<int>(percent / 10 * 10);
  return static_cast<int>(std::min<std::int64_t>(percent, 100));
}

bool flight_cell_changed(const FlightRecord& written, const FlightRecord& now) {
  return written.cell_execution_count != now.cell_execution_count ||
         written.cell_started_at_ms != now.cell_started_at_ms ||
         written.end_requested != now.end_requested;
}

bool flight_memory_changed(const FlightRecord& written, const FlightRecord& now) {
  // Far from any limit the tree's own memory still tells the story ("at 3.1 GiB"): a move by
  // a quarter of what was written (64 MiB at least) is news too.
  const bool rss_moved =
      written.rss >= 0 && now.rss >= 0 &&
      std::llabs(now.rss - written.rss) > std::max<std::int64_t>(64ll << 20, written.rss / 4);
  return memory_step(written) != memory_step(now) || rss_moved;
}

std::string this_host() {
  utsname u{};
  return ::uname(&u) == 0 ? std::string(u.nodename) : std::string();
}

std::string flight_record_name(const FlightRecord& record) {
  return std::string(kFlightRecordPrefix) + std::to_string(record.kernel_pid) + "-" +
         std::to_string(record.watchdog_pid) + "-" + record.token;
}

}  // namespace kwd::watch
