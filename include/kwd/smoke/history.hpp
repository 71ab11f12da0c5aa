#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "kwd/smoke/sharding.hpp"

namespace kwd::smoke {

// What smoke knows of each notebook from earlier runs: how long it took (balances --shard)
// and the most memory it held (packs `-j auto`). Kept in the --durations file; the format is
// docs/smoke-history.md. A file of the first format (a JSON object of notebook: seconds) is
// still read, and is written in the new one the next time it is stored.
struct NotebookRecord {
  std::optional<double> seconds;
  std::optional<std::int64_t> peak_rss;  // bytes, the kernel's process tree at its highest
  std::optional<std::int64_t> peak_gpu;  // bytes, on its GPU at its highest
  // Not stored: the run ended early (a cell failed, the kernel died), so its figures say only
  // "at least this much", and a larger record is kept.
  bool cut_short = false;
};
// By notebook_key().
using History = std::map<std::string, NotebookRecord>;

// Throws std::runtime_error naming the file and what is wrong; a missing file is empty.
History load_history(const std::filesystem::path& file);
// Merges `measured` into what the file holds (a field this run did not measure keeps its
// old value) and writes it whole, atomically.
void store_history(const std::filesystem::path& file, const History& measured);
// The seconds of those notebooks whose time is known: what --shard balances by.
Durations durations_of(const History& history);

}  // namespace kwd::smoke
