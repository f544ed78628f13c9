// Test support: runs the tprof binary (TPROF_BIN) with arguments, no shell.
#pragma once

#include <string>
#include <vector>

namespace tprof::testing {

struct CliResult {
  int exit_code = -1;  // -1: did not exit normally (crash or signal)
  int term_signal = 0;  // the signal it died of, when it did
  std::string out;
  std::string err;
};

// Runs `binary args...`, capturing stdout and stderr; stdin reads
// `stdin_path` when one is given.
CliResult run_cli(const std::string& binary, const std::vector<std::string>& args, const std::string& stdin_path = "");

}  // namespace tprof::testing
