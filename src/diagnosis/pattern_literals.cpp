#include "kwd/diagnosis/pattern_literals.hpp"

#include <cctype>

namespace kwd::diagnosis {

std::vector<std::string> required_literals(std::string_view pattern, std::size_t min_length) {
  std::vector<std::string> out;
  std::string best, run;
  int depth = 0;
  auto end_run = [&] {
    if (run.size() > best.size()) best = run;
    run.clear();
  };
  auto end_alternative = [&]() -> bool {
    end_run();
    if (best.size() < min_length) return false;
    out.push_back(best);
    best.clear();
    return true;
  };
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (depth > 0) {
      // Text inside a group may sit in an alternation or under a quantifier: not required.
      if (c == '\\')
        ++i;
      else if (c == '(')
        ++depth;
      else if (c == ')')
        --depth;
      continue;
    }
    switch (c) {
      case '\\':
        if (i + 1 < pattern.size() && !std::isalnum(static_cast<unsigned char>(pattern[i + 1]))) {
          run.push_back(pattern[++i]);  // an escaped punctuation character is itself
        } else {
          ++i;  // \d, \s, \b...: a class, not a literal
          end_run();
        }
        break;
      case '|':
        if (!end_alternative()) return {};
        break;
      case '(':
        ++depth;
        end_run();
        break;
      case '[':
        while (i < pattern.size() && pattern[i] != ']')
          i += pattern[i] == '\\' ? 2 : 1;
        end_run();
        break;
      case '?':
      case '*':
      case '{':
        // The character before was optional.
        if (!run.empty()) run.pop_back();
        end_run();
        if (c == '{')
          while (i < pattern.size() && pattern[i] != '}')
            ++i;
        break;
      case '+':
      case '.':
      case '^':
      case '$':
      case ')':
        end_run();
        break;
      default:
        run.push_back(c);
    }
  }
  if (!end_alternative()) return {};
  return out;
}

bool may_match(std::string_view line, const std::vector<std::string>& literals) {
  if (literals.empty()) return true;
  for (const auto& literal : literals)
    if (line.find(literal) != std::string_view::npos) return true;
  return false;
}

}  // namespace kwd::diagnosis
