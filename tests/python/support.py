"""What the Python tests share: where the data and the CLI are (ctest sets
TPROF_TEST_DATA and TPROF_BIN; see python/CMakeLists.txt), and running the
CLI for the JSON the module must reproduce."""

import json
import os
import subprocess
import unittest

DATA = os.environ.get("TPROF_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "data"))
TPROF_BIN = os.environ.get("TPROF_BIN", "")


# The CLI runs without what an ASan build's ctest preloads into the
# interpreter (python/CMakeLists.txt): a sanitized tprof brings its own
# runtime, and clang's static one refuses a second, preloaded one.
CLI_ENV = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONMALLOC")}


def data(*parts: str) -> str:
    return os.path.join(DATA, *parts)


def cli(*args: str) -> str:
    """stdout of `tprof -q ARGS` (fails the test on a non-zero exit)."""
    if not TPROF_BIN:
        raise unittest.SkipTest("TPROF_BIN is not set (run through ctest)")
    r = subprocess.run([TPROF_BIN, "-q", *args], capture_output=True, check=False, env=CLI_ENV)
    if r.returncode != 0:
        raise AssertionError(f"tprof {' '.join(args)}: exit {r.returncode}: {r.stderr.decode(errors='replace')}")
    return r.stdout.decode()


def cli_json(*args: str):
    return json.loads(cli(*args, "--format", "json"))


def plain(value):
    """A DataFrame cell as JSON would hold it (numpy scalars, pandas NA -> Python)."""
    import numpy as np
    import pandas as pd

    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def records(df):
    """The DataFrame's rows as dicts of plain values, missing cells dropped."""
    out = []
    for row in df.to_dict("records"):
        out.append({k: plain(v) for k, v in row.items() if plain(v) is not None})
    return out


def flat_rows(rows):
    """JSON rows flattened as tprof's DataFrames flatten them (nested
    objects of scalars one level deep, joined with '_')."""
    out = []
    for r in rows:
        f = {}
        for k, v in r.items():
            if isinstance(v, dict) and v and all(not isinstance(x, (dict, list)) for x in v.values()):
                for sk, sv in v.items():
                    if sv is not None:
                        f[f"{k}_{sk}"] = sv
            elif v is not None:
                f[k] = v
        out.append(f)
    return out
