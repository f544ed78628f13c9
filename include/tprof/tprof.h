// tprof/tprof.h — every public header: capture (Profiler, scopes), reading
// and writing traces, torch's tables, steps, diagnose, kernels, compare,
// ranks, sweep and the HTML report. Link tprof::tprof.
//
//   #include "tprof/tprof.h"
//   tprof::Result<tprof::Trace> trace = tprof::read_trace("run.pt.trace.json");
//
// A program that only records links tprof::capture and includes
// tprof/profiler.h (C++17 is enough there); this header needs C++20.
#pragma once

#include "tprof/causal.h"
#include "tprof/causal_report.h"
#include "tprof/compare.h"
#include "tprof/diagnose.h"
#include "tprof/html_report.h"
#include "tprof/info.h"
#include "tprof/kernels.h"
#include "tprof/key_averages.h"
#include "tprof/profiler.h"
#include "tprof/profiler_tables.h"
#include "tprof/ranks.h"
#include "tprof/read.h"
#include "tprof/record_function.h"
#include "tprof/status.h"
#include "tprof/steps.h"
#include "tprof/string_pool.h"
#include "tprof/sweep.h"
#include "tprof/table.h"
#include "tprof/trace.h"
#include "tprof/write.h"
