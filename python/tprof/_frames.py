"""DataFrames from the reports' JSON rows (a few rows per op, kernel or step,
never one per event): keys become columns in order of first appearance,
nested objects are flattened one level ("first_kernel" -> "first_kernel_name"),
and integer columns with gaps become pandas' nullable Int64, so ns
timestamps (1.7e18) never pass through float64."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional

import numpy as np
import pandas as pd

_MISSING = object()


def _flatten(row: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict) and value and all(not isinstance(v, (dict, list)) for v in value.values()):
            for sub, v in value.items():
                out[f"{key}_{sub}"] = v
        else:
            out[key] = value
    return out


def _column(values: List[Any]) -> Any:
    present = [v for v in values if v is not None and v is not _MISSING]
    missing = len(present) != len(values)
    values = [None if v is _MISSING else v for v in values]
    if present and all(isinstance(v, bool) for v in present):
        return pd.array(values, dtype="boolean") if missing else np.array(values, dtype=bool)
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        if all(-(2**63) <= v < 2**63 for v in present):
            return pd.array(values, dtype="Int64") if missing else np.array(values, dtype=np.int64)
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    if present and all(isinstance(v, str) for v in present) and not missing:
        return np.array(values, dtype=object)
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def frame(rows: Iterable[Dict[str, Any]], columns: Optional[List[str]] = None) -> pd.DataFrame:
    """Returns the rows as a DataFrame (see the module's docstring)."""
    flat = [_flatten(r) for r in rows]
    keys: List[str] = list(columns or [])
    seen = set(keys)
    for r in flat:
        for k in r:
            if k not in seen:
                seen.add(k)
                keys.append(k)
    data = {k: _column([r.get(k, _MISSING) for r in flat]) for k in keys}
    return pd.DataFrame(data, columns=keys)
