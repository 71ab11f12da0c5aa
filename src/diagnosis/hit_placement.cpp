// Evidence has a time and a cell. An error the kernel reported and then went on from (a later
// cell ran to its end) is context for the death, never its cause: the H100 notebook whose
// cell 2 hit CUDA OOM, whose cell 3 ran fine and whose cell 4 segfaulted died of the segfault.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "kwd/diagnosis/report_view.hpp"
#include "kwd/diagnosis/signature_scan.hpp"

namespace kwd::diagnosis {
namespace {

struct CellSpan {
  std::optional<std::int64_t> count;
  std::int64_t started_at_ms = 0;
  std::int64_t ended_at_ms = -1;  // -1: in flight at the death
};

std::optional<std::int64_t> integer_at(const nlohmann::json& item, const char* name) {
  const auto it = item.find(name);
  if (it == item.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<std::int64_t>();
}

// The cells that ran to their end (ok or error), oldest first, and the one in flight.
std::vector<CellSpan> finished_cells(const ReportView& view) {
  std::vector<CellSpan> cells;
  for (const auto& c : view.array("/execution/last_cells")) {
    if (!c.is_object()) continue;
    const auto status = c.find("status");
    if (status == c.end() || !status->is_string() || (*status != "ok" && *status != "error"))
      continue;
    const auto start = integer_at(c, "started_at_ms");
    const auto end = integer_at(c, "ended_at_ms");
    if (!start || !end || *end < *start) continue;
    cells.push_back({integer_at(c, "execution_count"), *start, *end});
  }
  return cells;
}

std::optional<CellSpan> cell_in_flight(const ReportView& view) {
  const auto* c = view.find("/execution/cell_in_flight");
  if (c == nullptr || !c->is_object()) return std::nullopt;
  const auto start = integer_at(*c, "started_at_ms");
  if (!start) return std::nullopt;
  return CellSpan{integer_at(*c, "execution_count"), *start, -1};
}

// The arrival time of the byte at `offset`, from [offset, ms] pairs in ascending order.
std::optional<std::int64_t> arrival_of(const nlohmann::json& arrivals, std::size_t offset) {
  std::optional<std::int64_t> at;
  for (const auto& pair : arrivals) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_unsigned() ||
        !pair[1].is_number_integer())
      continue;
    if (pair[0].get<std::uint64_t>() > offset) break;
    at = pair[1].get<std::int64_t>();
  }
  return at;
}

}  // namespace

namespace {

// The cell a thing seen at `at_ms` belongs to, when `cell` does not already say.
std::optional<std::int64_t> cell_at(const std::vector<CellSpan>& finished,
                                    const std::optional<CellSpan>& running, std::int64_t t) {
  // The time is when the watchdog read the bytes (or got the event), not when the kernel
  // wrote them: on a loaded machine a cell's last line is read after its end was published.
  // A line that arrived while no cell ran belongs to the last cell that started before it.
  std::optional<std::int64_t> cell;
  const CellSpan* before = nullptr;
  for (const auto& c : finished)
    if (c.started_at_ms <= t && (before == nullptr || c.started_at_ms >= before->started_at_ms))
      before = &c;
  if (before != nullptr) cell = before->count;
  if (running && running->started_at_ms <= t) cell = running->count;
  return cell;
}

// Survived: a cell that started after it (or, when its cell is known by number, a later
// cell) ran to its end. The last such cell, else nullopt.
std::optional<std::int64_t> survived_until(const std::vector<CellSpan>& finished,
                                           const std::optional<std::int64_t>& cell,
                                           const std::optional<std::int64_t>& at_ms) {
  std::optional<std::int64_t> until;
  for (const auto& c : finished) {
    const bool later = cell && c.count ? *c.count > *cell
                       : at_ms         ? c.started_at_ms > *at_ms
                                       : false;
    if (later) until = c.count.value_or(-1);
  }
  return until;
}

}  // namespace

void place_hits(const ReportView& view, std::vector<SignatureHit>& hits) {
  const auto finished = finished_cells(view);
  const auto running = cell_in_flight(view);
  for (auto& hit : hits) {
    if (!hit.arrivals_pointer.empty())
      hit.at_ms = arrival_of(view.array(hit.arrivals_pointer), hit.offset);
    if (!hit.cell && hit.at_ms) hit.cell = cell_at(finished, running, *hit.at_ms);
    hit.survived_until_cell = survived_until(finished, hit.cell, hit.at_ms);
  }
}

TimePlacement place_in_time(const ReportView& view, std::int64_t at_ms) {
  const auto finished = finished_cells(view);
  TimePlacement placed;
  placed.cell = cell_at(finished, cell_in_flight(view), at_ms);
  placed.survived_until_cell = survived_until(finished, placed.cell, at_ms);
  return placed;
}

}  // namespace kwd::diagnosis
