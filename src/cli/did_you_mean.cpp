#include "kwd/cli/did_you_mean.hpp"

#include <algorithm>

namespace kwd::cli {
namespace {

std::vector<const CLI::App*> subcommands_of(const CLI::App& app) {
  std::vector<const CLI::App*> found;
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (!sub->get_name().empty()) found.push_back(sub);
  return found;
}

// The closest name: a word that is a plural, singular or prefix of one ("report", "lis"), or
// within a third of its length in edits (at least one: "shwo", "kernlspec").
const CLI::App* closest(const std::vector<const CLI::App*>& candidates, std::string_view word) {
  const CLI::App* best = nullptr;
  std::size_t best_distance = 0;
  for (const auto* candidate : candidates) {
    const std::string& name = candidate->get_name();
    std::size_t distance = edit_distance(word, name);
    if (word.size() >= 3 && (name.starts_with(word) || word.starts_with(name))) distance = 0;
    const std::size_t allowed = std::max<std::size_t>(1, name.size() / 3);
    if (distance > allowed) continue;
    if (best == nullptr || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment over three rows: the previous two and this one.
  std::vector<std::size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        current[j] = std::min(current[j], before[j - 2] + 1);
    }
    before.swap(previous);
    previous.swap(current);
  }
  return previous[b.size()];
}

std::optional<CommandTypo> find_command_typo(const CLI::App& app,
                                             const std::vector<std::string>& args,
                                             const std::vector<std::string>& options_with_values) {
  const CLI::App* at = &app;
  std::string typed;  // the command words so far, corrected
  std::optional<std::string> first_unknown;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& word = args[i];
    const auto subs = subcommands_of(*at);
    if (word == "--" || subs.empty()) break;
    if (word.starts_with("-")) {
      // Only the top level's options come before a command; one whose value follows skips it.
      if (at == &app && word.find('=') == std::string::npos &&
          std::find(options_with_values.begin(), options_with_values.end(), word) !=
              options_with_values.end())
        ++i;
      continue;
    }
    const auto exact = std::find_if(subs.begin(), subs.end(),
                                    [&](const CLI::App* s) { return s->get_name() == word; });
    const CLI::App* next = exact != subs.end() ? *exact : closest(subs, word);
    if (next == nullptr) {
      // An unknown word where a command must be, and nothing near it.
      if (at->get_require_subcommand_min() > 0 || at == &app)
        return CommandTypo{first_unknown.value_or(word), std::nullopt};
      break;
    }
    if (exact == subs.end() && !first_unknown) first_unknown = word;
    typed += (typed.empty() ? "" : " ") + next->get_name();
    at = next;
  }
  if (!first_unknown) return std::nullopt;
  // "report" alone: name a subcommand too, the first (list, for reports), so the line runs.
  if (const auto subs = subcommands_of(*at); !subs.empty() && at->get_require_subcommand_min() > 0)
    typed += " " + subs.front()->get_name();
  // What followed the command words (`show latest`, `-- python3 ...`) as it was typed.
  for (; i < args.size(); ++i)
    typed += " " + args[i];
  return CommandTypo{*first_unknown, typed};
}

}  // namespace kwd::cli
