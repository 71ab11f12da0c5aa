#include "kwd/smoke/sharding.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>

namespace kwd::smoke {
namespace {

std::optional<unsigned> parse_count(std::string_view text) {
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return {};
  return value;
}

}  // namespace

std::optional<Shard> parse_shard(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return {};
  const auto index = parse_count(text.substr(0, slash));
  const auto count = parse_count(text.substr(slash + 1));
  if (!index || !count || *index < 1 || *index > *count) return {};
  return Shard{*index, *count};
}

double mean_seconds(const Durations& durations) {
  if (durations.empty()) return 0;
  double known = 0;
  for (const auto& [name, seconds] : durations)
    known += seconds;
  return known / static_cast<double>(durations.size());
}

std::string notebook_key(const std::filesystem::path& notebook) {
  return notebook.lexically_normal().generic_string();
}

std::vector<std::string> select_shard(const std::vector<std::string>& notebooks, Shard shard,
                                      const Durations& durations) {
  std::vector<std::size_t> order(notebooks.size());
  std::iota(order.begin(), order.end(), 0);
  const auto key = [&](std::size_t i) { return notebook_key(notebooks[i]); };
  std::vector<unsigned> assigned(notebooks.size(), 0);
  if (durations.empty()) {
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    for (std::size_t rank = 0; rank < order.size(); ++rank)
      assigned[order[rank]] = static_cast<unsigned>(rank % shard.count) + 1;
  } else {
    const double mean = mean_seconds(durations);
    std::vector<double> cost(notebooks.size());
    for (std::size_t i = 0; i < notebooks.size(); ++i) {
      const auto found = durations.find(key(i));
      cost[i] = found != durations.end() ? found->second : mean;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return cost[a] != cost[b] ? cost[a] > cost[b] : key(a) < key(b);
    });
    std::vector<double> load(shard.count, 0.0);
    for (std::size_t i : order) {
      const auto lightest =
          static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      load[lightest] += cost[i];
      assigned[i] = static_cast<unsigned>(lightest) + 1;
    }
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < notebooks.size(); ++i)
    if (assigned[i] == shard.index) out.push_back(notebooks[i]);
  return out;
}

}  // namespace kwd::smoke
