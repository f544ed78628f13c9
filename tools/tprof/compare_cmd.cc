// tprof compare A B: step-aligned, noise-aware diff of two traces; with
// --fail-if-slower PCT an exit status for CI.
#include <cmath>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/compare.h"

namespace tprof::cli {

void add_compare_command(CLI::App& app, int* rc) {
  struct Args {
    std::string a, b, format = "text", output;
    std::size_t top = 10;
    double max_slower_pct = 0;
    std::string metric = "auto";
    std::size_t min_steps = 5;
    bool allow_mismatch = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("compare", "Compare trace B against A: steps, ops, kernels, verdicts; a CI gate");
  cmd->add_option("A", args->a, "Baseline trace (.json or .json.gz; - reads stdin)")->required();
  cmd->add_option("B", args->b, "Trace compared against A (- reads stdin)")->required();
  cmd->add_option("--format", args->format, "text, json or md")
      ->check(CLI::IsMember({"text", "json", "md"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", args->output, "Write to a file instead of stdout");
  cmd->add_option("--top", args->top, "Op and kernel rows shown, by |delta| (0: all; JSON lists all)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  CLI::Option* gate = cmd->add_option("--fail-if-slower", args->max_slower_pct,
                                      "Exit 1 when B's mean per step (of --metric) is slower than A's by more than "
                                      "PCT percent and the 95% interval of the change lies above 0; exit 2 when it "
                                      "cannot decide (too few steps, different set-ups)")
                          ->type_name("PCT")
                          ->check(CLI::Validator(
                              [](const std::string& s) -> std::string {
                                double v = 0;
                                if (!CLI::detail::lexical_cast(s, v) || !std::isfinite(v) || v < 0) {
                                  return "PCT must be a non-negative number, got " + s;
                                }
                                return {};
                              },
                              "PCT >= 0"));

  cmd->add_option("--metric", args->metric,
                  "What the gate compares per step: auto (steady), steady (the time from one step's end to the next, "
                  "a step ending when its host work and the device work it launched are done), step (the "
                  "ProfilerStep's wall time), device (the device work it launched), cpu (its thread's busy time)")
      ->check(CLI::IsMember({"auto", "steady", "step", "device", "cpu"}))
      ->capture_default_str();
  cmd->add_option("--min-steps", args->min_steps,
                  "The gate refuses (exit 2) with fewer aligned steps: the noise is unknown")
      ->check(CLI::Range(1, 1000000000))
      ->capture_default_str();
  cmd->add_flag("--allow-mismatch", args->allow_mismatch,
                "Gate even when the device, device count, world size or dtype differ");

  cmd->callback([args, rc, gate] {
    // Both traces load at once; errors are reported in argument order.
    std::string error_b;
    std::future<std::optional<Trace>> fb =
        std::async(std::launch::async, [&] { return load_trace(args->b, false, &error_b); });
    std::string error_a;
    std::optional<Trace> a = load_trace(args->a, true, &error_a);
    std::optional<Trace> b = fb.get();
    std::cerr << error_a << error_b;
    if (!a || !b) {
      *rc = kExitBadInput;
      return;
    }

    const Comparison c = compare_traces(*a, *b);
    const CompareFormat f{.label_a = args->a, .label_b = args->b, .top = args->top};
    std::optional<GateResult> g;
    if (gate->count() > 0) {
      const CompareMetric metric = args->metric == "steady"   ? CompareMetric::kSteady
                                   : args->metric == "step"     ? CompareMetric::kStep
                                   : args->metric == "device" ? CompareMetric::kDevice
                                   : args->metric == "cpu"    ? CompareMetric::kCpu
                                                              : CompareMetric::kAuto;
      g = check_gate(c, {.max_slower_pct = args->max_slower_pct,
                         .metric = metric,
                         .min_steps = args->min_steps,
                         .allow_mismatch = args->allow_mismatch});
    }
    const std::string text = args->format == "json" ? format_comparison_json(c, f, g ? &*g : nullptr)
                             : args->format == "md" ? format_comparison_md(c, f, g ? &*g : nullptr)
                                                    : format_comparison_text(c, f, g ? &*g : nullptr);
    note_diagnostics(*a, args->a);
    note_diagnostics(*b, args->b);
    *rc = emit(text, args->output, std::vector<std::string>{args->a, args->b},
               args->format == "json" ? Markup::kJson : Markup::kNone);
    if (*rc != kExitOk || !g) return;
    std::cerr << format_gate_line(*g);
    if (g->outcome == GateOutcome::kFail) *rc = kExitCheckFailed;
    if (g->outcome == GateOutcome::kRefused) *rc = kExitBadInput;
  });
}

}  // namespace tprof::cli
