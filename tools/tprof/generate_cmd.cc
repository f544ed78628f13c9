// tprof completion bash|zsh|fish, tprof man: the shell completion scripts
// and the man page, generated from the CLI::App tree itself, so they list exactly the
// commands, options and fixed values that parse. Both commands are hidden
// from --help (group ""); the build writes their output next to the binary
// and installs it (tools/tprof/CMakeLists.txt).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"

namespace tprof::cli {

namespace {

// One option or positional argument, as both outputs need it.
struct OptionDoc {
  std::vector<std::string> names;    // "-o", "--output"; empty for a positional
  std::string positional;            // "TRACE"
  std::string value;                 // "" for a flag; else CLI11's type name ("TEXT", "INT", "PCT")
  std::vector<std::string> choices;  // the set of an IsMember check, when there is one
  std::string description;
  bool required = false;
  bool repeated = false;  // takes more than one value (TRACE in tprof report A B)
};

struct CommandDoc {
  std::string name, description;
  std::vector<OptionDoc> options, positionals;
};

// CLI11 writes an option's type as "TYPE[:CHECK]...", and an IsMember check
// as "{a,b,c}": the set is read back from there, since CLI11 keeps no other
// public handle on it. The values tprof checks this way hold no commas.
OptionDoc describe(const CLI::Option& opt) {
  OptionDoc d;
  for (const std::string& s : opt.get_snames()) d.names.push_back("-" + s);
  for (const std::string& l : opt.get_lnames()) d.names.push_back("--" + l);
  if (d.names.empty()) d.positional = opt.get_name(true);
  d.description = opt.get_description();
  d.required = opt.get_required();
  d.repeated = opt.get_items_expected_max() > 1;
  if (opt.get_type_size() == 0) return d;
  const std::string type = opt.get_type_name();
  d.value = type.substr(0, type.find(':'));
  for (std::size_t at = type.find(':'); at != std::string::npos;) {
    const std::size_t next = type.find(':', at + 1);
    const std::string_view check =
        std::string_view(type).substr(at + 1, next == std::string::npos ? next : next - at - 1);
    at = next;
    if (check.size() < 2 || check.front() != '{' || check.back() != '}') continue;
    for (std::size_t b = 1; b < check.size();) {
      const std::size_t e = std::min(check.find(',', b), check.size() - 1);
      d.choices.emplace_back(check.substr(b, e - b));
      b = e + 1;
    }
  }
  return d;
}

// The visible options and positionals of `app`, in definition order.
CommandDoc describe(const CLI::App& app) {
  CommandDoc c{app.get_name(), app.get_description(), {}, {}};
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_group().empty()) continue;  // hidden
    OptionDoc d = describe(*opt);
    (d.names.empty() ? c.positionals : c.options).push_back(std::move(d));
  }
  return c;
}

// Every command, hidden ones (these two) included: they are tprof's commands
// too, only kept out of --help to keep it short.
std::vector<CommandDoc> describe_commands(const CLI::App& root) {
  std::vector<CommandDoc> out;
  for (const CLI::App* sub : root.get_subcommands([](const CLI::App*) { return true; })) {
    out.push_back(describe(*sub));
  }
  return out;
}

std::string join(const std::vector<std::string>& words, std::string_view sep) {
  std::string out;
  for (const std::string& w : words) out.append(out.empty() ? "" : sep).append(w);
  return out;
}

// The names of the options of `c` that take a value ("-o", "--output", "--format").
std::vector<std::string> value_option_names(const CommandDoc& c) {
  std::vector<std::string> names;
  for (const OptionDoc& o : c.options) {
    if (!o.value.empty()) names.insert(names.end(), o.names.begin(), o.names.end());
  }
  return names;
}

// Appends the case arms that print an option's fixed values ("--format) echo text json csv ;;").
void append_value_arms(std::string* out, const CommandDoc& c, std::string_view indent) {
  for (const OptionDoc& o : c.options) {
    if (o.choices.empty()) continue;
    out->append(indent).append(join(o.names, "|")).append(") echo \"").append(join(o.choices, " ")).append("\" ;;\n");
  }
}

// The shell function `_tprof_values COMMAND OPTION` (bash and zsh alike):
// the fixed values of OPTION, or nothing.
std::string values_function(const CommandDoc& global, const std::vector<CommandDoc>& commands) {
  std::string s = "# _tprof_values COMMAND OPTION: the fixed values of OPTION, or nothing.\n";
  s += "_tprof_values() {\n  case \"$2\" in\n";
  append_value_arms(&s, global, "    ");
  s += "  esac\n  case \"$1\" in\n";
  for (const CommandDoc& c : commands) {
    std::string arms;
    append_value_arms(&arms, c, "        ");
    if (arms.empty()) continue;
    s += "    " + c.name + ")\n      case \"$2\" in\n" + arms + "      esac ;;\n";
  }
  return s + "  esac\n}\n\n";
}

// Two `case` statements (bash and zsh alike) that run `action` when the
// option (`option`, e.g. "$opt") is a global one taking a value, or when
// "COMMAND OPTION" (`command_option`) names a command's option taking one.
std::string takes_value_cases(const std::vector<std::string>& global_values, const std::vector<CommandDoc>& commands,
                              std::string_view option, std::string_view command_option, std::string_view action) {
  std::string s = "  case " + std::string(option) + " in\n";
  if (!global_values.empty()) s += "    " + join(global_values, "|") + ") " + std::string(action) + " ;;\n";
  s += "  esac\n  case " + std::string(command_option) + " in\n";
  for (const CommandDoc& c : commands) {
    const std::vector<std::string> names = value_option_names(c);
    if (names.empty()) continue;
    std::vector<std::string> patterns;
    for (const std::string& n : names) patterns.push_back("\"" + c.name + " " + n + "\"");
    s += "    " + join(patterns, " | ") + ") " + std::string(action) + " ;;\n";
  }
  return s + "  esac\n";
}

// The script follows the bash-completion conventions without needing that
// package: it handles COMP_WORDBREAKS splitting "--format=json" into
// "--format" "=" "json", and global options before or after the command.
std::string bash_completion(const CLI::App& root) {
  const CommandDoc global = describe(root);
  const std::vector<CommandDoc> commands = describe_commands(root);
  std::vector<std::string> command_names, global_names;
  for (const CommandDoc& c : commands) command_names.push_back(c.name);
  for (const OptionDoc& o : global.options) global_names.insert(global_names.end(), o.names.begin(), o.names.end());
  const std::vector<std::string> global_values = value_option_names(global);

  std::string s =
      "# bash completion for tprof; generated by `tprof completion bash` from its command definitions.\n"
      "# Install: source it, or copy it to $(pkg-config --variable=completionsdir bash-completion)/tprof.\n\n";
  s += values_function(global, commands);

  s += "_tprof() {\n";
  s += "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"\" opt=\"\" cmd=\"\" values=\"\" i\n";
  s += "  ((COMP_CWORD > 0)) && prev=\"${COMP_WORDS[COMP_CWORD - 1]}\"\n";
  s += "  # The command: the first word that is neither an option nor a global option's value.\n";
  s += "  for ((i = 1; i < COMP_CWORD; i++)); do\n    case \"${COMP_WORDS[i]}\" in\n";
  if (!global_values.empty()) {
    s += "      " + join(global_values, "|") +
         ")\n        if [[ \"${COMP_WORDS[i + 1]}\" == \"=\" ]]; then ((i += 2)); else ((i++)); fi ;;\n";
  }
  s += "      -* | =) ;;\n      *)\n        cmd=\"${COMP_WORDS[i]}\"\n        break\n        ;;\n    esac\n  done\n";
  s += "  # The option whose value is being completed: \"--format json\", \"--format=json\".\n";
  s += "  if [[ \"$cur\" == \"=\" ]]; then\n    opt=\"$prev\"\n    cur=\"\"\n";
  s += "  elif [[ \"$prev\" == \"=\" ]] && ((COMP_CWORD > 1)); then\n    opt=\"${COMP_WORDS[COMP_CWORD - 2]}\"\n";
  s += "  elif [[ \"$prev\" == -* ]]; then\n    opt=\"$prev\"\n  fi\n";
  s += "  local takes_value=0\n";
  s += takes_value_cases(global_values, commands, "\"$opt\"", "\"$cmd $opt\"", "takes_value=1");
  s += "  if ((takes_value)); then\n    values=\"$(_tprof_values \"$cmd\" \"$opt\")\"\n";
  s += "    if [[ -n \"$values\" ]]; then\n";
  s += "      mapfile -t COMPREPLY < <(compgen -W \"$values\" -- \"$cur\")\n";
  s += "    else\n      compopt -o filenames 2>/dev/null\n";
  s += "      mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n    fi\n    return 0\n  fi\n";
  s += "  local words\n  case \"$cmd\" in\n";
  s += "    \"\") words=\"" + join(command_names, " ") + "\" ;;\n";
  for (const CommandDoc& c : commands) {
    std::vector<std::string> names;
    for (const OptionDoc& o : c.options) names.insert(names.end(), o.names.begin(), o.names.end());
    s += "    " + c.name + ") words=\"" + join(names, " ") + "\" ;;\n";
  }
  s += "  esac\n";
  s += "  if [[ \"$cur\" == -* ]]; then\n";
  s += "    mapfile -t COMPREPLY < <(compgen -W \"$words " + join(global_names, " ") + "\" -- \"$cur\")\n";
  s += "  elif [[ -z \"$cmd\" ]]; then\n    mapfile -t COMPREPLY < <(compgen -W \"$words\" -- \"$cur\")\n";
  s += "  else\n    compopt -o filenames 2>/dev/null\n    mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n  fi\n";
  s += "  return 0\n}\n\ncomplete -F _tprof tprof\n";
  return s;
}

// zsh: a completion function for fpath (#compdef) or to source. It does
// what the bash script does with the completion system's own words:
// `words`/`CURRENT` for the line, compadd for values, commands and options,
// _files for TRACE and values without a fixed set.
std::string zsh_completion(const CLI::App& root) {
  const CommandDoc global = describe(root);
  const std::vector<CommandDoc> commands = describe_commands(root);
  std::vector<std::string> command_names, global_names;
  for (const CommandDoc& c : commands) command_names.push_back(c.name);
  for (const OptionDoc& o : global.options) global_names.insert(global_names.end(), o.names.begin(), o.names.end());
  const std::vector<std::string> global_values = value_option_names(global);
  std::string s =
      "#compdef tprof\n"
      "# zsh completion for tprof; generated by `tprof completion zsh` from its command definitions.\n"
      "# Install: save as _tprof in a directory of $fpath (before compinit), or source it.\n\n";
  s += values_function(global, commands);
  s += "# _tprof_takes_value COMMAND OPTION: whether OPTION takes a value.\n";
  s += "_tprof_takes_value() {\n";
  s += takes_value_cases(global_values, commands, "\"$2\"", "\"$1 $2\"", "return 0");
  s += "  return 1\n}\n\n";
  s += "_tprof() {\n";
  s += "  local cur=\"${words[CURRENT]}\" prev=\"${words[CURRENT-1]}\" cmd=\"\" opt=\"\" values=\"\" i\n";
  s += "  # The command: the first word that is neither an option nor a global option's value.\n";
  s += "  for ((i = 2; i < CURRENT; i++)); do\n    case \"${words[i]}\" in\n";
  if (!global_values.empty()) s += "      " + join(global_values, "|") + ") ((i++)) ;;\n";
  s += "      -*) ;;\n      *) cmd=\"${words[i]}\"; break ;;\n    esac\n  done\n";
  s += "  # A value: \"--format json\" or \"--format=json\".\n";
  s += "  if [[ \"$cur\" == --*=* ]]; then\n";
  s += "    opt=\"${cur%%=*}\"\n";
  s += "    values=\"$(_tprof_values \"$cmd\" \"$opt\")\"\n";
  s += "    if [[ -n \"$values\" ]]; then compadd -P \"$opt=\" -- ${=values}; else _files; fi\n    return\n  fi\n";
  s += "  if [[ \"$prev\" == -* ]] && _tprof_takes_value \"$cmd\" \"$prev\"; then\n";
  s += "    values=\"$(_tprof_values \"$cmd\" \"$prev\")\"\n";
  s += "    if [[ -n \"$values\" ]]; then compadd -- ${=values}; else _files; fi\n    return\n  fi\n";
  s += "  local opts\n  case \"$cmd\" in\n";
  s += "    \"\") opts=\"\" ;;\n";
  for (const CommandDoc& c : commands) {
    std::vector<std::string> names;
    for (const OptionDoc& o : c.options) names.insert(names.end(), o.names.begin(), o.names.end());
    s += "    " + c.name + ") opts=\"" + join(names, " ") + "\" ;;\n";
  }
  s += "  esac\n";
  s += "  if [[ \"$cur\" == -* ]]; then\n    compadd -- ${=opts} " + join(global_names, " ") + "\n";
  s += "  elif [[ -z \"$cmd\" ]]; then\n    compadd -- " + join(command_names, " ") + "\n";
  s += "  else\n    _files\n  fi\n}\n\n";
  // Sourced (not autoloaded from fpath): register it; autoloaded: run it.
  s += "if [[ \"${funcstack[1]}\" == _tprof ]]; then\n  _tprof \"$@\"\nelse\n  compdef _tprof tprof 2>/dev/null\nfi\n";
  return s;
}

// fish: one `complete` line per command, option and value set; conditions
// on the command seen so far (__fish_seen_subcommand_from). An option with
// a fixed set offers only it (-x -a); one with a free value, files (-r -F).
std::string fish_quote(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

// The description's first clause (unless that leaves a word or two),
// short enough for fish's pager.
std::string fish_description(const std::string& d) {
  std::size_t end = d.size();
  for (const std::string_view sep : {"; ", " (", ": ", "\n"}) {
    const std::size_t at = d.find(sep);
    if (at != std::string::npos && at >= 12) end = std::min(end, at);
  }
  std::string s = d.substr(0, end);
  while (!s.empty() && (s.back() == ' ' || s.back() == ',')) s.pop_back();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// A number: CLI11 names its type INT, UINT, FLOAT... No file names for it.
bool numeric_value(const std::string& type) {
  return type == "INT" || type == "UINT" || type == "FLOAT" || type == "NUMBER" || type == "PCT";
}

void append_fish_option(std::string* out, const OptionDoc& o, const std::string& condition) {
  std::string line = "complete -c tprof";
  if (!condition.empty()) line += " -n " + fish_quote(condition);
  for (const std::string& n : o.names) {
    if (n.starts_with("--")) {
      line += " -l " + n.substr(2);
    } else if (n.size() == 2) {
      line += " -s " + n.substr(1);
    } else {
      line += " -o " + n.substr(1);
    }
  }
  if (!o.choices.empty()) {
    line += " -x -a " + fish_quote(join(o.choices, " "));
  } else if (numeric_value(o.value)) {
    line += " -x";
  } else if (!o.value.empty()) {
    line += " -r -F";
  }
  const std::string d = fish_description(o.description);
  if (!d.empty()) line += " -d " + fish_quote(d);
  out->append(line).append("\n");
}

std::string fish_completion(const CLI::App& root) {
  const CommandDoc global = describe(root);
  const std::vector<CommandDoc> commands = describe_commands(root);
  std::vector<std::string> command_names;
  for (const CommandDoc& c : commands) command_names.push_back(c.name);
  std::string s =
      "# fish completion for tprof; generated by `tprof completion fish` from its command definitions.\n"
      "# Install: copy to ~/.config/fish/completions/tprof.fish (or source it).\n\n";
  s += "complete -c tprof -e\n";
  s += "# No command yet: the commands (files are offered only where a command takes them).\n";
  s += "complete -c tprof -f\n";
  for (const CommandDoc& c : commands) {
    s += "complete -c tprof -n " + fish_quote("not __fish_seen_subcommand_from " + join(command_names, " ")) +
         " -a " + c.name + " -d " + fish_quote(fish_description(c.description)) + "\n";
  }
  s += "# Global options, before or after the command.\n";
  for (const OptionDoc& o : global.options) append_fish_option(&s, o, "");
  for (const CommandDoc& c : commands) {
    const std::string cond = "__fish_seen_subcommand_from " + c.name;
    s += "# tprof " + c.name + "\n";
    if (!c.positionals.empty()) s += "complete -c tprof -n " + fish_quote(cond) + " -F\n";
    for (const OptionDoc& o : c.options) {
      if (o.names == std::vector<std::string>{"-h", "--help"}) continue;
      append_fish_option(&s, o, cond);
    }
  }
  return s;
}

// Text for roff: a backslash is \e, a line starting with . or ' is kept
// from being read as a request, and every non-ASCII character is written as
// \[uXXXX] so the page needs no input encoding (table's "µs").
std::string roff(std::string_view text) {
  std::string out;
  if (!text.empty() && (text.front() == '.' || text.front() == '\'')) out += "\\&";
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\e";
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      // Valid UTF-8 is all tprof's own strings hold.
      const int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
      std::uint32_t cp = c & (0x3Fu >> extra);
      for (int k = 0; k < extra && i + 1 < text.size(); ++k) {
        cp = (cp << 6) | (static_cast<unsigned char>(text[++i]) & 0x3Fu);
      }
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\[u%04X]", cp);
      out += buf;
    }
  }
  return out;
}

// "-o" as roff: hyphens in option names are minus signs (\-), so they can be
// searched for and copied.
std::string roff_option(std::string_view name) {
  std::string out;
  for (const char c : name) {
    if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

constexpr std::size_t kMaxInlineChoices = 6;

void append_option_items(std::string* out, const std::vector<OptionDoc>& options) {
  for (const OptionDoc& o : options) {
    out->append(".TP\n");
    if (!o.positional.empty()) {
      out->append("\\fI").append(o.positional).append(o.repeated ? "\\fR...\n" : "\\fR\n");
    } else {
      std::string head;
      for (const std::string& n : o.names) {
        head.append(head.empty() ? "" : ", ").append("\\fB" + roff_option(n) + "\\fR");
      }
      if (!o.choices.empty() && o.choices.size() <= kMaxInlineChoices) {
        std::vector<std::string> choices;
        for (const std::string& v : o.choices) choices.push_back("\\fI" + roff_option(v) + "\\fR");
        head += " " + join(choices, "|");
      } else if (!o.value.empty()) {
        head += " \\fI" + o.value + "\\fR";
      }
      out->append(head).append("\n");
    }
    out->append(roff(o.description)).append(o.required && o.positional.empty() ? " (required)" : "");
    // A long set (diagnose --only's rule ids) is listed in the text, where
    // lines can break; in the tag it would overrun the page.
    if (o.choices.size() > kMaxInlineChoices) out->append("; one of: ").append(roff(join(o.choices, ", ")));
    out->append("\n");
  }
}

std::string man_page(const CLI::App& root) {
  const CommandDoc global = describe(root);
  std::string s;
  s += ".\\\" Generated by `tprof man` from tprof's command definitions; do not edit.\n";
  s += ".TH TPROF 1 \"\" \"tprof " TPROF_VERSION "\" \"User Commands\"\n";
  // No hyphenation and a ragged right margin: option names and paths stay whole.
  s += ".nh\n.ad l\n";
  s += ".SH NAME\ntprof \\- " + roff(global.description.substr(global.description.find(": ") + 2)) + "\n";
  s += ".SH SYNOPSIS\n.B tprof\n[\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR...] [\\fIGLOBAL OPTIONS\\fR]\n";
  s += ".br\n.B tprof \\-\\-version\n";
  s += ".SH DESCRIPTION\n" + roff(global.description) + ".\n";
  s += ".PP\nTraces are torch.profiler / Kineto JSON files, plain or gzip-compressed (detected by content). "
       "A TRACE of \\fB\\-\\fR reads standard input, so traces can be piped in:\n";
  s += ".PP\n.RS\n.nf\nzcat run.json.gz | tprof table \\-\n.fi\n.RE\n";
  s += ".PP\nGlobal options are accepted before or after the command.\n";
  s += ".SH GLOBAL OPTIONS\n";
  append_option_items(&s, global.options);
  s += ".SH COMMANDS\n";
  for (const CommandDoc& c : describe_commands(root)) {
    std::string synopsis = "tprof " + c.name;
    if (!c.options.empty()) synopsis += " [OPTIONS]";
    for (const OptionDoc& p : c.positionals) {
      const std::string arg = p.positional + (p.repeated ? "..." : "");
      synopsis += " " + (p.required ? arg : "[" + arg + "]");
    }
    s += ".SS \"" + roff_option(synopsis) + "\"\n" + roff(c.description) + ".\n";
    std::vector<OptionDoc> items = c.positionals;
    for (const OptionDoc& o : c.options) {
      // Every command has -h/--help; the global section says so once.
      if (o.names != std::vector<std::string>{"-h", "--help"}) items.push_back(o);
    }
    append_option_items(&s, items);
  }
  s += ".SH EXIT STATUS\n";
  s += ".TP\n.B 0\nSuccess.\n";
  s += ".TP\n.B 1\nA check failed: \\fBtprof compare \\-\\-fail\\-if\\-slower\\fR found B slower.\n";
  s += ".TP\n.B 2\nBad input or usage: the message names the file, the byte offset and what was expected.\n";
  s += ".SH ENVIRONMENT\n";
  s += ".TP\n.B NO_COLOR\nWhen set and not empty, severities are not coloured with \\fB\\-\\-color=auto\\fR "
       "(https://no-color.org).\n";
  s += ".TP\n.B TERM\nWhen \\fBdumb\\fR, severities are not coloured with \\fB\\-\\-color=auto\\fR.\n";
  s += ".SH SEE ALSO\n";
  s += "The README and docs/ in tprof's source tree: docs/diagnose.md (every rule), docs/compare.md, "
       "docs/report.md, docs/scale.md, docs/serve.md, docs/sweep.md.\n";
  s += "torch.profiler: https://pytorch.org/docs/stable/profiler.html\n";
  return s;
}

}  // namespace

void add_completion_command(CLI::App& app, int* rc) {
  struct Args {
    std::string shell = "bash", output;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("completion", "Print the shell completion script (bash, zsh or fish)")->group("");
  cmd->add_option("SHELL", a->shell, "Shell: bash, zsh or fish")->check(CLI::IsMember({"bash", "zsh", "fish"}))->required();
  cmd->add_option("-o,--output", a->output, "Write to a file instead of stdout");
  cmd->callback([a, rc, &app] {
    const std::string script = a->shell == "zsh"    ? zsh_completion(app)
                               : a->shell == "fish" ? fish_completion(app)
                                                    : bash_completion(app);
    *rc = emit(script, a->output, "");
  });
}

void add_man_command(CLI::App& app, int* rc) {
  auto output = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("man", "Print the man page (roff; man -l to read it)")->group("");
  cmd->add_option("-o,--output", *output, "Write to a file instead of stdout");
  cmd->callback([output, rc, &app] { *rc = emit(man_page(app), *output, ""); });
}

}  // namespace tprof::cli
