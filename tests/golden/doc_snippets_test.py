#!/usr/bin/env python3
"""Every C++ snippet of README.md and docs/*.md compiles at the language
level it says (issue 42, item 5).

    doc_snippets_test.py REPO_ROOT [CXX]

A ```cpp block is a whole program, compiled as C++17 unless it says
otherwise, or a fragment introduced by an HTML comment right above it:

    <!-- snippet: c++20; given: int m = 0, n = 0; std::string name; -->

`c++17` or `c++20` is the level it is compiled at, and a c++20 block must
say "C++20" in its own text, where a reader sees it. A fragment is compiled
inside `tprof::Status snippet_() { GIVEN; BLOCK; return {}; }` after every
public header (with TPROF_HAS_TABLES, as tprof::tprof gives its users), so
it may use TPROF_TRY. Each block is also compiled one
level lower (a c++20 block as C++17): it must fail there, so the level a
block states is the lowest it needs. Compiled with -fsyntax-only
-Wall -Wextra -Wpedantic -Werror. Exits 0 when all compile, 1 otherwise.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^(\s*)```cpp\s*$")
MARK = re.compile(r"<!--\s*snippet:\s*(c\+\+17|c\+\+20)\s*(?:;\s*given:\s*(.*?))?\s*-->")


def blocks(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent = m.group(1)
        j = i + 1
        body = []
        while j < len(lines) and lines[j].strip() != "```":
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        # The marker: the nearest non-blank line above the fence.
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mark = MARK.search(lines[k]) if k >= 0 else None
        yield i + 1, "\n".join(body), mark
        i = j + 1


def compile_source(cxx, root, std, source):
    with tempfile.NamedTemporaryFile("w", suffix=".cc", delete=False) as f:
        f.write(source)
        name = f.name
    try:
        r = subprocess.run([cxx, "-std=" + std, "-fsyntax-only", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
                            "-Wno-unused-variable", "-Wno-unused-but-set-variable",
                            # As tprof::tprof (the tables' target) defines it for its users.
                            "-DTPROF_HAS_TABLES=1", "-I", os.path.join(root, "include"), name], capture_output=True, text=True)
        return r.returncode == 0, r.stderr
    finally:
        os.unlink(name)


def main():
    root = sys.argv[1]
    cxx = sys.argv[2] if len(sys.argv) > 2 else "c++"
    headers = sorted(os.path.basename(h) for h in glob.glob(os.path.join(root, "include", "tprof", "*.h")))
    prelude = "".join(f'#include "tprof/{h}"\n' for h in headers)
    prelude += "#include <cstdint>\n#include <iostream>\n#include <queue>\n#include <string>\n#include <utility>\n#include <vector>\n"
    failures = checked = 0
    for path in [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
        for line, body, mark in blocks(path):
            where = f"{os.path.relpath(path, root)}:{line}"
            level = mark.group(1) if mark else "c++17"
            if mark:
                source = prelude + "tprof::Status snippet_() {\n" + (mark.group(2) or "") + "\n" + body + \
                         "\nreturn {};\n}\n"
            else:
                source = body + "\n"
            ok, err = compile_source(cxx, root, level, source)
            checked += 1
            if not ok:
                print(f"FAIL {where}: does not compile as {level.upper()}:\n{err[:2000]}")
                failures += 1
                continue
            if level == "c++20":
                if "C++20" not in body:
                    print(f"FAIL {where}: compiled as C++20, but the snippet does not say C++20")
                    failures += 1
                lower_ok, _ = compile_source(cxx, root, "c++17", source)
                if lower_ok:
                    print(f"FAIL {where}: marked c++20 but compiles as C++17: mark it c++17")
                    failures += 1
            print(f"ok   {where} ({level.upper()})")
    if checked == 0:
        print("FAIL: no C++ snippet found")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
