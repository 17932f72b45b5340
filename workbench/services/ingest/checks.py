"""Checks every importer applies before writing: duplicates within the file, ids the project
does not know (an error, or rows dropped with ``skip_unknown``), and conflicts with stored rows.
Each raises :class:`~workbench.errors.InputError` naming the file, the first line and the
first few examples."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from workbench import lazylibs
from workbench.errors import InputError, clip
from workbench.services.ingest.result import ImportResult

if TYPE_CHECKING:  # imported where needed: the streamed corpus import (short) runs without pandas
    import pandas as pd

EXAMPLES = 3


def where(row) -> str:
    line = int(row["line"]) if "line" in row and lazylibs.pandas.notna(row["line"]) else 0
    return f" (line {line})" if line else ""


def locations(group: pd.DataFrame) -> str:
    if not group["line"].gt(0).any() and "metadata" in group:  # a folder has files, not lines
        return "files " + ", ".join(str(m.get("file")) for m in group["metadata"].head(3))
    return "lines " + ", ".join(str(int(x)) for x in group["line"].head(3))


def reject_unwritable_ids(frame: pd.DataFrame, columns: list[str], path: str) -> None:
    """Ids holding a space, tab or newline (or empty) are refused at ``file:line``.

    TREC and BEIR files separate columns by whitespace and cannot quote, so such an id would be
    exported raw and could not be read back (by us or by trec_eval).
    """
    for column in columns:
        values = frame[column].astype(str)
        bad = values.str.contains(r"\s", regex=True) | (values.str.len() == 0)
        if not bad.any():
            continue
        row = frame[bad.to_numpy()].iloc[0]
        value = str(row[column])
        what = "is empty" if not value else "contains a space, tab or newline"
        where_file = ""
        if "line" not in frame or not int(row["line"] or 0):
            meta = row.get("metadata") if hasattr(row, "get") else None
            where_file = f" (file {meta.get('file')})" if isinstance(meta, dict) and meta.get("file") else ""
        raise InputError(
            f"{column} {clip(value)}{where_file} {what}; ids are written unquoted in TREC and BEIR files, "
            f"so they must be non-empty and hold no whitespace: rename it ({int(bad.sum()):,} such rows)",
            path=path, line=int(row["line"]) if "line" in frame and int(row["line"] or 0) else None,
        )


def reject_duplicates(frame: pd.DataFrame, key: list[str], what: str, path: str) -> None:
    """Any key twice in one file is an error naming the first repeats and where they are."""
    dup = frame[frame.duplicated(key, keep=False)]
    if dup.empty:
        return
    groups = dup.groupby(key, sort=False)
    examples = []
    for values, group in list(groups)[:EXAMPLES]:
        values = values if isinstance(values, tuple) else (values,)
        examples.append(f"{'/'.join(clip(str(v))[1:-1] for v in values)} at {locations(group)}")
    second = int(dup[dup.duplicated(key)]["line"].iloc[0])
    raise InputError(
        f"{groups.ngroups:,} duplicate {what} (first: {'; '.join(examples)}); each must appear once in the "
        f"file; remove the repeats",
        path=path, line=second or None,
    )


def drop_unknown(frame: pd.DataFrame, unknown: pd.Series, column: str, what: str, hint: str,
                  path: str, skip: bool, result: ImportResult) -> pd.DataFrame:
    """Rows naming ids the project lacks: an error (count + examples), or dropped with ``skip``."""
    if not unknown.any():
        return frame
    bad = frame[unknown]
    if skip:
        result.skipped[f"unknown {what}"] = result.skipped.get(f"unknown {what}", 0) + len(bad)
        return frame[~unknown]
    distinct = bad.drop_duplicates(column)
    examples = ", ".join(f"{clip(r[column])}{where(r)}" for _, r in distinct.head(EXAMPLES).iterrows())
    raise InputError(
        f"{len(bad):,} rows name {len(distinct):,} {what} that are not in the project (first: {examples}); "
        f"{hint}, or {{set_field:skip_unknown}} to drop these rows",
        path=path, line=int(bad["line"].iloc[0]) or None,
    )


def conflict(rows: pd.DataFrame, key: str, describe: Callable[[pd.Series], str], what: str, path: str,
              fix: str) -> None:
    if rows.empty:
        return
    examples = "; ".join(f"{clip(r[key])}{where(r)}: {describe(r)}" for _, r in rows.head(EXAMPLES).iterrows())
    raise InputError(
        f"conflicts with the stored {what}: {len(rows):,} have the same id but different content "
        f"(first: {examples}); nothing was imported. {fix}",
        path=path, line=int(rows["line"].iloc[0]) or None,
    )


def differs(a: pd.Series, b: pd.Series) -> pd.Series:
    """Element-wise ``a != b`` where two missing values are equal (never NA)."""

    a_missing, b_missing = a.isna().to_numpy(), b.isna().to_numpy()
    unequal = a.astype(object).to_numpy() != b.astype(object).to_numpy()
    return lazylibs.pandas.Series((a_missing != b_missing) | (~a_missing & ~b_missing & unequal), index=a.index)


def short(text, n: int = 40) -> str:
    text = "" if text is None else str(text)
    return repr(text if len(text) <= n else text[:n] + "…")
