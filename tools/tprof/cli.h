// The tprof command line as a function, so that the program (main.cc) and
// the CLI-arguments fuzz target (tests/fuzz/cli_fuzzer.cc) run the same code.
#pragma once

namespace tprof::cli {

// Parses argv (argv[0] is the program name) and runs the subcommand; returns
// the exit code (0 ok, 1 a check failed, 2 bad input or arguments). It never
// calls exit(); output goes to stdout, stderr and the files the flags name.
int run(int argc, const char* const* argv);

}  // namespace tprof::cli
