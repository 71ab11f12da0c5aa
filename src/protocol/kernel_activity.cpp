#include "kwd/protocol/kernel_activity.hpp"

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "kwd/protocol/content_fields.hpp"

namespace kwd::protocol {
namespace {

constexpr std::size_t kMaxCodeBytes = 64 * 1024;
constexpr std::size_t kStderrStreamBytes = 8 * 1024;
constexpr std::size_t kMaxTracebackLines = 64;
constexpr std::size_t kMaxTracebackLineBytes = 4096;
constexpr std::size_t kMaxErrorTextBytes = 4096;
constexpr std::int64_t kMaxClockSkewMs = 60'000;

double seconds_between(std::int64_t from_ms, std::int64_t to_ms) {
  return static_cast<double>(std::max<std::int64_t>(to_ms - from_ms, 0)) / 1000.0;
}

nlohmann::json bytes_or_null(std::int64_t v) {
  return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr);
}

}  // namespace

KernelActivity::KernelActivity(std::size_t last_cells)
    : cells_(last_cells, kMaxCodeBytes), stderr_stream_(kStderrStreamBytes) {}

std::int64_t KernelActivity::made_at(const Message& m, std::int64_t now_ms) {
  // By the kernel's clock (the same machine's, for a local kernel): the message may have
  // left the kernel long after it was made. A date far from now (a remote kernel's clock, a
  // kernel that writes none) is not trusted.
  const std::int64_t made_ms = m.date_ms();
  return made_ms > 0 && std::abs(made_ms - now_ms) <= kMaxClockSkewMs ? made_ms : now_ms;
}

void KernelActivity::on_message(const Message& m, std::int64_t now_ms) {
  const std::int64_t at_ms = made_at(m, now_ms);
  const auto& type = m.msg_type;
  if (type == "status") {
    const auto state = text_field(m.content, "execution_state", {}, 64);
    if (!state.empty()) state_ = state;
    if (!ready_at_ms_ && !state.empty() && state != "starting") ready_at_ms_ = now_ms;
    if (state == "busy" && m.parent_msg_type == "execute_request")
      cells_.request_started(m.parent_msg_id, at_ms);
    // Idle after an execute_request ends that cell; idle after anything else says nothing
    // about it.
    if (state == "idle" && !m.parent_msg_id.empty()) cells_.end(m.parent_msg_id, at_ms);
    return;
  }
  if (type == "execute_input") {
    std::int64_t count = -1;
    const auto it = m.content.find("execution_count");
    if (it != m.content.end() && it->is_number_integer()) count = it->get<std::int64_t>();
    // Not a conditional expression: its common type would be a temporary std::string.
    std::string_view text;
    const auto code = m.content.find("code");
    if (code != m.content.end() && code->is_string()) text = code->get_ref<const std::string&>();
    cells_.start(m.parent_msg_id, count, text, at_ms);
    return;
  }
  if (type == "shutdown_reply") {
    shutdown_requested_ = true;
    return;
  }
  if (type == "stream") {
    if (text_field(m.content, "name") == "stderr") {
      const auto text = m.content.find("text");
      if (text != m.content.end() && text->is_string())
        stderr_stream_.append(text->get_ref<const std::string&>(), at_ms);
    }
  } else if (type == "error") {
    on_error(m);
  }
  if (!m.parent_msg_id.empty()) cells_.on_output(m.parent_msg_id, m);
}

void KernelActivity::on_cell_announced(std::int64_t execution_count, std::string_view code,
                                       bool truncated, std::int64_t now_ms) {
  cells_.announced_by_kernel(execution_count, code, truncated, now_ms);
}

void KernelActivity::on_error(const Message& m) {
  ShownError e;
  e.ename = text_field(m.content, "ename", {}, kMaxErrorTextBytes);
  e.evalue = text_field(m.content, "evalue", {}, kMaxErrorTextBytes);
  const auto tb = m.content.find("traceback");
  if (tb != m.content.end() && tb->is_array()) {
    // The last lines are where the error is: keep those when there are too many.
    const std::size_t n = tb->size();
    const std::size_t first = n > kMaxTracebackLines ? n - kMaxTracebackLines : 0;
    for (std::size_t i = first; i < n; ++i)
      if ((*tb)[i].is_string())
        e.traceback.push_back(
            (*tb)[i].get_ref<const std::string&>().substr(0, kMaxTracebackLineBytes));
  }
  const Cell* cell = cells_.in_flight();
  if (cell != nullptr && cell->request_id == m.parent_msg_id)
    e.execution_count = cell->execution_count;
  for (const auto& done : cells_.finished())
    if (done.request_id == m.parent_msg_id) e.execution_count = done.execution_count;
  last_error_ = std::move(e);
}

nlohmann::json KernelActivity::to_json(std::int64_t at_ms) const {
  using nlohmann::json;
  json out;
  out["state_at_death"] = state_ ? json(*state_) : json(nullptr);
  out["shutdown_requested"] = shutdown_requested_;
  out["cells_started"] = cells_.cells_started();

  if (const Cell* c = cells_.in_flight()) {
    // Without its execute_input, the count is inferred: one more than the last one seen.
    const std::int64_t count =
        c->input_seen ? c->execution_count : cells_.last_execution_count() + 1;
    out["cell_in_flight"] = {
        {"execution_count", count >= 0 ? json(count) : json(nullptr)},
        {"execution_count_inferred", !c->input_seen},
        {"code", c->input_seen ? json(c->code) : json(nullptr)},
        {"code_truncated", c->code_truncated},
        {"announced_by_kernel", c->announced_by_kernel},
        {"started_at_ms", c->started_at_ms},
        {"running_for_s", seconds_between(c->started_at_ms, at_ms)},
        {"rss_at_start", bytes_or_null(c->rss.start)},
        {"rss_peak", bytes_or_null(c->rss.peak)},
        {"gpu_at_start", bytes_or_null(cells_.gpu_start_of(*c))},
        {"gpu_peak", bytes_or_null(std::max(c->gpu.peak, cells_.gpu_start_of(*c)))},
        {"outputs", c->outputs.to_json()}};
  } else {
    out["cell_in_flight"] = nullptr;
  }

  auto& last = out["last_cells"] = json::array();
  for (const Cell& c : cells_.finished()) {
    // A cell that ended after the last sample: the newest reading is the best there is.
    const std::int64_t rss_end =
        c.awaiting_end_sample && cells_.latest_rss() >= 0 ? cells_.latest_rss() : c.rss.end;
    const std::int64_t gpu_start = cells_.gpu_start_of(c);
    const std::int64_t gpu_end = cells_.gpu_end_of(c);
    const auto delta = [](std::int64_t start, std::int64_t end) {
      return start >= 0 && end >= 0 ? json(end - start) : json(nullptr);
    };
    last.push_back(
        {{"execution_count", c.execution_count >= 0 ? json(c.execution_count) : json(nullptr)},
         {"code", c.code},
         {"code_truncated", c.code_truncated},
         {"started_at_ms", c.started_at_ms},
         {"ended_at_ms", c.ended_at_ms},
         {"duration_s", seconds_between(c.started_at_ms, c.ended_at_ms)},
         {"rss_start", bytes_or_null(c.rss.start)},
         {"rss_end", bytes_or_null(rss_end)},
         {"rss_peak", bytes_or_null(std::max(c.rss.peak, rss_end))},
         {"rss_delta", delta(c.rss.start, rss_end)},
         {"gpu_start", bytes_or_null(gpu_start)},
         {"gpu_end", bytes_or_null(gpu_end)},
         {"gpu_peak", bytes_or_null(std::max({c.gpu.peak, gpu_start, gpu_end}))},
         {"gpu_delta", delta(gpu_start, gpu_end)},
         {"status", c.status},
         {"outputs", c.outputs.to_json()}});
  }

  if (last_error_) {
    const auto& e = *last_error_;
    out["last_error"] = {
        {"execution_count", e.execution_count >= 0 ? json(e.execution_count) : json(nullptr)},
        {"ename", e.ename},
        {"evalue", e.evalue},
        {"traceback", e.traceback}};
  } else {
    out["last_error"] = nullptr;
  }
  out["stream_stderr_tail"] = stderr_stream_.contents();
  out["stream_stderr_arrivals"] = stderr_stream_.arrival_times();
  return out;
}

}  // namespace kwd::protocol
