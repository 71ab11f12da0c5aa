#include "kwd/cli/completion_script.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

namespace kwd::cli {
namespace {

struct CommandNode {
  std::string path;  // "reports show"; "" for the program itself
  std::vector<std::string> subcommands;
  std::vector<std::string> options;
};

// What the value of an option is, by its name: the same name means the same thing in every
// command.
enum class ValueKind { kNone, kDirectory, kFile, kChoice, kOther };

ValueKind value_kind(const std::string& option) {
  static const std::set<std::string> directories = {"--report-dir", "--runtime-dir", "--cwd",
                                                    "--output-dir", "--prefix"};
  static const std::set<std::string> files = {"--junit",  "--metrics-textfile", "-o",
                                              "--output", "--nvml-library",     "--status-socket"};
  if (directories.contains(option)) return ValueKind::kDirectory;
  if (files.contains(option)) return ValueKind::kFile;
  if (option == "--log-level" || option == "--log-format") return ValueKind::kChoice;
  return ValueKind::kOther;
}

void collect(const CLI::App& app, const std::string& path, std::vector<CommandNode>& nodes,
             std::map<std::string, ValueKind>& valued) {
  CommandNode node{path, {}, {}};
  const auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  for (const auto* sub : subs)
    node.subcommands.push_back(sub->get_name());
  for (const auto* option : app.get_options()) {
    if (!option->nonpositional()) continue;
    std::vector<std::string> names;
    for (const auto& l : option->get_lnames())
      names.push_back("--" + l);
    for (const auto& s : option->get_snames())
      names.push_back("-" + s);
    for (const auto& name : names) {
      node.options.push_back(name);
      // A flag expects no value (CLI11 still gives it a type size of 1).
      if (option->get_expected_max() != 0) valued[name] = value_kind(name);
    }
  }
  nodes.push_back(std::move(node));
  for (const auto* sub : subs)
    collect(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), nodes, valued);
}

std::string joined(const std::vector<std::string>& words, const char* separator = " ") {
  std::string out;
  for (const auto& w : words)
    out += (out.empty() ? "" : separator) + w;
  return out;
}

std::vector<std::string> names_of(const std::map<std::string, ValueKind>& valued, ValueKind kind) {
  std::vector<std::string> names;
  for (const auto& [name, k] : valued)
    if (k == kind) names.push_back(name);
  return names;
}

struct Tree {
  std::vector<CommandNode> nodes;
  std::map<std::string, ValueKind> valued;
  explicit Tree(const CLI::App& app) { collect(app, "", nodes, valued); }

  // `case "$cmd:$word" in` arms: a word that is a subcommand of the command so far.
  // One `case "$cmd" in` arm per command: `before` WORDS `after`, its subcommands and options.
  [[nodiscard]] std::string command_arms(const std::string& before,
                                         const std::string& after) const {
    std::string arms;
    for (const auto& node : nodes) {
      std::vector<std::string> words = node.subcommands;
      words.insert(words.end(), node.options.begin(), node.options.end());
      arms += "    \"" + node.path + "\") " + before + joined(words) + after + " ;;\n";
    }
    return arms;
  }

  [[nodiscard]] std::string subcommand_patterns() const {
    std::vector<std::string> patterns;
    for (const auto& node : nodes)
      for (const auto& sub : node.subcommands)
        patterns.push_back("\"" + node.path + ":" + sub + "\"");
    return joined(patterns, "|");
  }
};

// One `case` arm for these option names, or nothing when there are none.
std::string arm(const std::vector<std::string>& names, const std::string& body) {
  return names.empty() ? "" : "    " + joined(names, "|") + ") " + body + "\n";
}

constexpr const char* kLogLevels = "trace debug info warn error off";
constexpr const char* kLogFormats = "text json";

}  // namespace

std::string bash_completion_script(const CLI::App& app) {
  const Tree tree(app);
  std::string s =
      "# bash completion for kernel-watchdog, written by `kernel-watchdog completion bash`\n"
      "_kernel_watchdog() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
      "  local cmd=\"\" word i\n"
      "  COMPREPLY=()\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    word=\"${COMP_WORDS[i]}\"\n"
      "    if [[ \"$word\" == \"--\" && \"$cmd\" == run ]]; then\n"
      "      # The kernel's own command line: a program first, then files.\n"
      "      compopt -o filenames 2>/dev/null\n"
      "      if ((i + 1 == COMP_CWORD)); then mapfile -t COMPREPLY < <(compgen -c -- \"$cur\");\n"
      "      else mapfile -t COMPREPLY < <(compgen -f -- \"$cur\"); fi\n"
      "      return 0\n"
      "    fi\n"
      "    case \"$cmd:$word\" in\n"
      "      " +
      tree.subcommand_patterns() +
      ") cmd=\"${cmd:+$cmd }$word\" ;;\n"
      "    esac\n"
      "  done\n"
      "  case \"$prev\" in\n" +
      arm(names_of(tree.valued, ValueKind::kDirectory),
          "compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -d -- \"$cur\"); "
          "return 0 ;;") +
      arm(names_of(tree.valued, ValueKind::kFile),
          "compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- \"$cur\"); "
          "return 0 ;;") +
      "    --log-level) COMPREPLY=($(compgen -W \"" + kLogLevels +
      "\" -- \"$cur\")); return 0 ;;\n"
      "    --log-format) COMPREPLY=($(compgen -W \"" +
      kLogFormats + "\" -- \"$cur\")); return 0 ;;\n" +
      arm(names_of(tree.valued, ValueKind::kOther), "return 0 ;;") +
      "  esac\n"
      "  local words=\"\"\n"
      "  case \"$cmd\" in\n";
  s += tree.command_arms("words=\"", "\"");
  s += "  esac\n"
       "  if [[ \"$cur\" != -* ]]; then\n"
       "    case \"$cmd\" in\n"
       "      smoke) compopt -o filenames 2>/dev/null\n"
       "        mapfile -t COMPREPLY < <(compgen -f -X '!*.ipynb' -- \"$cur\"; compgen -d -- "
       "\"$cur\")\n"
       "        return 0 ;;\n"
       "      \"reports show\"|\"reports html\"|\"reports open\"|\"reports diagnose\")\n"
       "        words=\"latest $words\" ;;\n"
       "    esac\n"
       "  fi\n"
       "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
       "}\n"
       "complete -F _kernel_watchdog kernel-watchdog\n";
  return s;
}

std::string zsh_completion_script(const CLI::App& app) {
  const Tree tree(app);
  // `path` is zsh's mirror of PATH: the command so far is `cmd` here too.
  std::string s =
      "#compdef kernel-watchdog\n"
      "# zsh completion for kernel-watchdog, written by `kernel-watchdog completion zsh`\n"
      "_kernel_watchdog() {\n"
      "  local cmd=\"\" word i\n"
      "  local -a choices\n"
      "  for ((i = 2; i < CURRENT; i++)); do\n"
      "    word=\"${words[i]}\"\n"
      "    if [[ \"$word\" == \"--\" && \"$cmd\" == run ]]; then\n"
      "      if ((i + 1 == CURRENT)); then _command_names -e; else _files; fi\n"
      "      return\n"
      "    fi\n"
      "    case \"$cmd:$word\" in\n"
      "      " +
      tree.subcommand_patterns() +
      ") cmd=\"${cmd:+$cmd }$word\" ;;\n"
      "    esac\n"
      "  done\n"
      "  case \"${words[CURRENT-1]}\" in\n" +
      arm(names_of(tree.valued, ValueKind::kDirectory), "_files -/; return ;;") +
      arm(names_of(tree.valued, ValueKind::kFile), "_files; return ;;") +
      "    --log-level) compadd " + kLogLevels +
      "; return ;;\n"
      "    --log-format) compadd " +
      kLogFormats + "; return ;;\n" + arm(names_of(tree.valued, ValueKind::kOther), "return ;;") +
      "  esac\n"
      "  case \"$cmd\" in\n";
  s += tree.command_arms("choices=(", ")");
  s += "  esac\n"
       "  if [[ \"${words[CURRENT]}\" != -* ]]; then\n"
       "    case \"$cmd\" in\n"
       "      smoke) _files -g '*.ipynb'; return ;;\n"
       "      \"reports show\"|\"reports html\"|\"reports open\"|\"reports diagnose\")\n"
       "        choices=(latest $choices) ;;\n"
       "    esac\n"
       "  fi\n"
       "  compadd -- $choices\n"
       "}\n"
       "_kernel_watchdog \"$@\"\n";
  return s;
}

}  // namespace kwd::cli
