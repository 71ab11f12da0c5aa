#include "kwd/smoke/sharding.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <stdexcept>

#include "kwd/util/private_files.hpp"

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

std::string notebook_key(const std::filesystem::path& notebook) {
  return notebook.lexically_normal().generic_string();
}

Durations load_durations(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) {
    std::error_code error;
    if (!std::filesystem::exists(file, error)) return {};
    throw std::runtime_error(file.string() + ": cannot be read");
  }
  const auto json = nlohmann::json::parse(in, nullptr, false);
  if (!json.is_object())
    throw std::runtime_error(file.string() +
                             ": not a durations file (a JSON object of notebook: seconds)");
  Durations out;
  for (const auto& [key, value] : json.items()) {
    if (!value.is_number() || value.get<double>() < 0)
      throw std::runtime_error(file.string() + ": \"" + key + "\" has no number of seconds");
    out[key] = value.get<double>();
  }
  return out;
}

void store_durations(const std::filesystem::path& file, const Durations& measured) {
  Durations all = load_durations(file);
  for (const auto& [key, seconds] : measured)
    all[key] = seconds;
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, seconds] : all)
    json[key] = std::round(seconds * 1000) / 1000;
  const auto absolute = std::filesystem::absolute(file);
  util::write_file_atomically(absolute.parent_path(), absolute.filename().string(),
                              json.dump(2) + "\n", 0644);
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
    double known = 0;
    for (const auto& [name, seconds] : durations)
      known += seconds;
    const double mean = known / static_cast<double>(durations.size());
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
