// tprof table TRACE: torch's key_averages().table() for any trace.
#include <CLI/CLI.hpp>
#include <iostream>

#include "tools/tprof/common.h"
#include "tprof/key_averages.h"
#include "tprof/table.h"

namespace tprof::cli {

namespace {

struct TableArgs {
  std::string trace;
  std::string sort_by;
  int row_limit = 100;
  bool group_by_input_shape = false;
  int group_by_stack_n = 0;
  bool top_level_only = false;
  int max_name_width = 55;
  std::string header;
  std::string memory = "auto";
  bool events = false;
  std::string times = "auto";
  std::string format = "text";
  std::string output;
};

int run_table(const TableArgs& a) {
  std::optional<Trace> trace = load_trace(a.trace);
  if (!trace) return kExitBadInput;
  EventListOptions lo;
  lo.time = a.times == "us" ? TimeSemantics::kTruncatedMicros
            : a.times == "ns" ? TimeSemantics::kExactNanos
                              : TimeSemantics::kAuto;
  lo.with_shapes = a.group_by_input_shape || a.events;
  lo.with_stacks = a.group_by_stack_n > 0 || a.events;
  lo.with_memory = a.memory != "off" || a.sort_by.find("memory") != std::string::npos;
  const EventList list = EventList::build(*trace, lo);

  TableOptions to;
  to.sort_by = a.sort_by;
  to.row_limit = a.row_limit;
  to.max_name_column_width = a.max_name_width;
  to.top_level_events_only = a.top_level_only;
  to.has_header = !a.header.empty();
  to.header = a.header;
  to.profile_memory = a.memory == "on" || (a.memory == "auto" && list.has_memory_records());
  to.dropped_events = trace->meta.dropped_events;
  to.device_name = device_name_of(*trace);
  const std::vector<StatRow> rows =
      a.events ? list.event_rows() : list.key_averages(a.group_by_input_shape, a.group_by_stack_n);
  Result<std::string> text = a.format == "json"  ? format_table_json(rows, to)
                             : a.format == "csv" ? format_table_csv(rows, to)
                                                 : format_table(rows, to);
  if (!text) {
    std::cerr << "tprof: " << text.error().to_string() << "\n";
    return kExitBadInput;
  }
  note_diagnostics(*trace, a.trace);
  return emit(*text, a.output, a.trace, a.format == "json" ? Markup::kJson : Markup::kNone);
}

}  // namespace

namespace {

std::string sort_keys_set() {
  std::string s = "{";
  for (const std::string& k : table_sort_keys()) s += (s.size() > 1 ? "," : "") + k;
  return s + "}";
}

}  // namespace

void add_table_command(CLI::App& app, int* rc) {
  auto args = std::make_shared<TableArgs>();
  CLI::App* cmd = app.add_subcommand("table", "torch's key_averages().table(), byte for byte");
  cmd->add_option("TRACE", args->trace, "Trace file (.json or .json.gz; - reads stdin)")->required();
  cmd->add_option("--sort-by", args->sort_by,
                  "Sort key, as torch: cpu_time_total, self_cpu_time_total, cuda_time_total, "
                  "self_cuda_time_total, cpu_time, cuda_time, cpu_memory_usage, self_cpu_memory_usage, "
                  "cuda_memory_usage, self_cuda_memory_usage, count (default: first appearance)")
      // The keys as a set in the option's type, where completion and the man
      // page read an option's values; render_table checks the value and
      // names the valid keys itself.
      ->check(CLI::Validator([](std::string&) { return std::string(); }, sort_keys_set()));
  cmd->add_option("--row-limit", args->row_limit, "Rows to print (negative: all)")->capture_default_str();
  cmd->add_flag("--group-by-input-shape", args->group_by_input_shape, "key_averages(group_by_input_shape=True)");
  cmd->add_option("--group-by-stack-n", args->group_by_stack_n, "key_averages(group_by_stack_n=N)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--top-level-only", args->top_level_only, "table(top_level_events_only=True)");
  cmd->add_option("--max-name-width", args->max_name_width, "table(max_name_column_width=N)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--header", args->header, "A header line above the table");
  cmd->add_option("--format", args->format,
                  "text (torch's table, byte for byte), json or csv (the same rows, full names, ns and bytes)")
      ->check(CLI::IsMember({"text", "json", "csv"}));
  cmd->add_option("--memory", args->memory, "CPU Mem columns: auto (when the trace has [memory] events), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_flag("--events", args->events, "One row per event: prof.events().table()");
  cmd->add_option("--times", args->times,
                  "Time semantics: auto, us (torch 1.13: truncated µs), ns (torch >= 2.1: exact)")
      ->check(CLI::IsMember({"auto", "us", "ns"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", args->output, "Write to a file instead of stdout");
  cmd->callback([args, rc] { *rc = run_table(*args); });
}

}  // namespace tprof::cli
