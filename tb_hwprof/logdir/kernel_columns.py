"""Only some columns of a run's kernels file, for readers that need few of its ~50 (compare).

A kernels file (format 2, tables.write_columnar_gz) is {"columns", "units", "rows", then "data",
"delta", "dictionary" (objects of one member per column), "constant", "sparse"}.  Compare reads
~16 of its ~50 columns; parsing all of a 1M-launch file (~140 MB of JSON) was half the time of
`tb-hwprof compare`.  The members of the others are stepped over (columnar_json), and only the
wanted ones are parsed.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..core.errors import InputError
from ..core.model import KERNEL_COLUMNS
from . import columnar_json, columns, metadata, tables
from .reader import asset_dir
from .run_checks import REEXPORT

def read_selected_columns(raw: bytes, wanted: set) -> dict:
    """The columnar document of a kernels file holding only the `wanted` columns' values (the
    others' names stay in "columns"), numbers as arrays (columnar_json.read_columns)."""
    return columnar_json.read_columns(raw, wanted, columnar_json.NUMERIC_KERNEL_COLUMNS)


def read_kernel_columns(run_dir: Path, manifest: dict, wanted: set) -> pd.DataFrame:
    """The run's kernels table with only the `wanted` columns, decoded from the columnar file
    (docs/FORMAT.md) straight into a frame: a 1M-launch table has ~50 more columns, and filling in
    the absent ones (read_kernels' normalised table) costs a copy of 8 MB each.  Text columns may
    hold None where the table has nulls (compare takes any non-str as missing); a wanted column the
    table lacks (written before it existed) is empty text or NaN."""
    path = asset_dir(run_dir) / metadata.KERNELS
    try:
        doc = read_selected_columns(tables.read_gz_bytes(path, metadata.declared_size(manifest, metadata.KERNELS)), wanted)
        present = [c for c in doc["columns"] if c in wanted]
        data = {c: columns.decode_column(doc, c, tables.SPEC_DTYPES[KERNEL_COLUMNS[c][1]] if c in KERNEL_COLUMNS else None)
                for c in present}
        rows = int(doc["rows"])
    except metadata.DAMAGED_FILE_ERRORS as e:
        raise InputError(path, f"unreadable kernels table ({e})", REEXPORT) from None
    for column in wanted - set(present):  # a table written before the column existed
        text = KERNEL_COLUMNS.get(column, ("", "float"))[1] == "str"
        data[column] = np.full(rows, "" if text else np.nan, dtype=object if text else np.float64)
    # Series of dtype object: pandas would otherwise infer (and convert to) its string dtype.
    return pd.DataFrame({c: pd.Series(v, dtype=object if np.asarray(v).dtype == object else None, copy=False)
                         for c, v in data.items()}, copy=False)
