#include "kwd/launch/python_startup.hpp"

#include <filesystem>
#include <string_view>

namespace kwd::launch {
namespace {

bool is_python(const std::string& program) {
  const std::string name = std::filesystem::path(program).filename().string();
  return name.starts_with("python") || name.starts_with("pypy");
}

std::string because_of(char option) {
  switch (option) {
    case 'I':
      return "its interpreter runs isolated (-I), which ignores PYTHONPATH and skips the "
             "user's site directory";
    case 'E':
      return "its interpreter ignores the PYTHON* environment variables (-E), PYTHONPATH "
             "among them";
    default:
      return "its interpreter skips site.py (-S), which imports sitecustomize";
  }
}

}  // namespace

std::string shim_blocked_by(const std::vector<std::string>& argv) {
  if (argv.empty() || !is_python(argv.front())) return {};
  // CPython's own option syntax: short options may be grouped ("-IB"); -W and -X take a
  // value (attached or the next word); -c, -m, "-" or the first non-option end the options.
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string_view word = argv[i];
    if (word.size() < 2 || word[0] != '-') return {};
    if (word[1] == '-') {
      if (word == "--check-hash-based-pycs") ++i;  // the one long option with a value
      continue;
    }
    for (std::size_t at = 1; at < word.size(); ++at) {
      const char option = word[at];
      if (option == 'I' || option == 'E' || option == 'S') return because_of(option);
      if (option == 'c' || option == 'm') return {};
      if (option == 'W' || option == 'X') {
        if (at + 1 == word.size()) ++i;
        break;
      }
    }
  }
  return {};
}

}  // namespace kwd::launch
