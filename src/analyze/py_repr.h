// Python's str()/repr() of JSON values, as torch prints them in tables
// ("Input Shapes": str(input_shapes) of a list of lists of ints).
#pragma once

#include <string>

#include "src/trace/json_value.h"

namespace tprof::internal {

// Appends Python's repr of `v`: lists "[1, 2]", dicts "{'k': 1}", strings
// single-quoted, true/false/null as True/False/None, numbers as written
// (floats normalised to Python's repr when they parse).
void append_py_repr(const JsonValue& v, std::string* out);

}  // namespace tprof::internal
