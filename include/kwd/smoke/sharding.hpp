#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::smoke {

// `smoke --shard K/N`: this job runs the K-th of N parts of the notebook suite (1-based), as
// pytest-split users split a suite across CI jobs.
struct Shard {
  unsigned index = 1;  // K
  unsigned count = 1;  // N
};
// "K/N" with 1 <= K <= N; nullopt for anything else.
std::optional<Shard> parse_shard(std::string_view text);

// Seconds each notebook took, by the key notebook_key() gives (from the history file, history.hpp).
using Durations = std::map<std::string, double>;
// What a notebook the durations do not know is counted as: the mean of those they do (0 for
// none).
double mean_seconds(const Durations& durations);
// The path as given, made lexically normal: the same in every job of one checkout.
std::string notebook_key(const std::filesystem::path& notebook);

// The notebooks of one shard, in the order given. Without durations: the notebooks sorted by
// key, every N-th from the K-th (stable while the suite does not change). With durations:
// longest first, each to the shard with the least time so far (ties: the lowest shard); a
// notebook the file does not know counts as the mean of those it does. Every notebook is in
// exactly one shard, for every K of the same N and the same input.
std::vector<std::string> select_shard(const std::vector<std::string>& notebooks, Shard shard,
                                      const Durations& durations);

}  // namespace kwd::smoke
