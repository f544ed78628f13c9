// tprof memory TRACE|SNAPSHOT: memory over time per device, the peak and
// what held it, spikes and growth per step (docs/memory.md). A file that
// starts like a pickle is read as torch.cuda.memory._dump_snapshot output.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "src/base/file.h"
#include "tools/tprof/common.h"
#include "tprof/memory.h"

namespace tprof::cli {

namespace {

// The first bytes of `path` (none for stdin or a file that cannot be opened:
// the trace loader then reports why).
std::string head_bytes(const std::string& path) {
  if (path == "-") return {};
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return {};
  char b[2] = {0, 0};
  const std::size_t n = std::fread(b, 1, 2, f);
  std::fclose(f);
  return std::string(b, n);
}

}  // namespace

void add_memory_command(CLI::App& app, int* rc) {
  struct Args {
    std::string input, format = "text", output, device;
    std::size_t top = 10, buckets = 200;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "memory", "Memory per device: over time, the peak and what held it, spikes and growth per step");
  cmd->add_option("TRACE", a->input,
                  "Trace with [memory] records (.json, .json.gz; - reads stdin), or a memory snapshot pickle")
      ->required();
  cmd->add_option("--format", a->format, "text, json, md or csv (csv: one row per record)")
      ->check(CLI::IsMember({"text", "json", "md", "csv"}))
      ->capture_default_str();
  cmd->add_option("--device", a->device, "Only this device: its index (0, 1, ...) or cpu");
  cmd->add_option("--top", a->top, "Groups listed per view")->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--buckets", a->buckets, "Points of the JSON timeline per device")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to a file instead of stdout");
  cmd->callback([a, rc] {
    MemoryOptions o;
    o.top = a->top;
    o.buckets = a->buckets;
    if (!a->device.empty()) {
      if (a->device == "cpu" || a->device == "CPU") {
        o.device = -1;
      } else {
        int id = -1;
        if (std::sscanf(a->device.c_str(), "%d", &id) != 1 || id < 0 || id > 32767 ||
            std::to_string(id) != a->device) {
          std::cerr << "tprof memory: --device: expected a device index (0, 1, ...) or cpu, got '" << a->device
                    << "'\n";
          *rc = kExitBadInput;
          return;
        }
        o.device = static_cast<std::int16_t>(id);
      }
    }
    MemoryInput in;
    std::optional<Trace> trace;
    if (looks_like_pickle(head_bytes(a->input))) {
      // Mapped, not copied: a 1 GB snapshot reads at 1.5x its size (bench/README.md).
      Result<internal::MappedFile> bytes = internal::MappedFile::open(a->input);
      if (!bytes) {
        std::cerr << "tprof: " << bytes.error().with_path(a->input).to_string() << "\n";
        *rc = kExitBadInput;
        return;
      }
      Result<MemoryInput> snap = read_memory_snapshot(bytes->bytes(), a->input);
      if (!snap) {
        std::cerr << "tprof: " << snap.error().to_string() << "\n";
        *rc = kExitBadInput;
        return;
      }
      in = std::move(*snap);
    } else {
      trace = load_trace(a->input);
      if (!trace) {
        *rc = kExitBadInput;
        return;
      }
      in = memory_input(*trace);
    }
    const MemoryReport r = analyze_memory(in, o);
    std::string text;
    if (a->format == "json") {
      text = format_memory_json(r);
    } else if (a->format == "md") {
      text = format_memory_markdown(r);
    } else if (a->format == "csv") {
      text = format_memory_csv(in, r);
    } else {
      text = format_memory_text(r);
    }
    if (trace) note_diagnostics(*trace, a->input);
    *rc = emit(text, a->output, a->input, a->format == "json" ? Markup::kJson : Markup::kNone);
  });
}

}  // namespace tprof::cli
