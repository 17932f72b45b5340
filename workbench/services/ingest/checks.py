"""Checks every importer applies before writing: duplicates within the file, ids the project
does not know (an error, or rows dropped with ``skip_unknown``), and conflicts with stored rows.
Each raises :class:`~workbench.errors.InputError` naming the file, the first line and the
first few examples."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from workbench.errors import InputError
from workbench.services.ingest.result import ImportResult

EXAMPLES = 3


def where(row) -> str:
    line = int(row["line"]) if "line" in row and pd.notna(row["line"]) else 0
    return f" (line {line})" if line else ""


def locations(group: pd.DataFrame) -> str:
    if not group["line"].gt(0).any() and "metadata" in group:  # a folder has files, not lines
        return "files " + ", ".join(str(m.get("file")) for m in group["metadata"].head(3))
    return "lines " + ", ".join(str(int(x)) for x in group["line"].head(3))


def reject_duplicates(frame: pd.DataFrame, key: list[str], what: str, path: str) -> None:
    """Any key twice in one file is an error naming the first repeats and where they are."""
    dup = frame[frame.duplicated(key, keep=False)]
    if dup.empty:
        return
    groups = dup.groupby(key, sort=False)
    examples = []
    for values, group in list(groups)[:EXAMPLES]:
        values = values if isinstance(values, tuple) else (values,)
        examples.append(f"{'/'.join(map(str, values))} at {locations(group)}")
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
    examples = ", ".join(f"{r[column]!r}{where(r)}" for _, r in distinct.head(EXAMPLES).iterrows())
    raise InputError(
        f"{len(bad):,} rows name {len(distinct):,} {what} that are not in the project (first: {examples}); "
        f"{hint}, or pass --skip-unknown to drop these rows",
        path=path, line=int(bad["line"].iloc[0]) or None,
    )


def conflict(rows: pd.DataFrame, key: str, describe: Callable[[pd.Series], str], what: str, path: str,
              fix: str) -> None:
    if rows.empty:
        return
    examples = "; ".join(f"{r[key]!r}{where(r)}: {describe(r)}" for _, r in rows.head(EXAMPLES).iterrows())
    raise InputError(
        f"conflicts with the stored {what}: {len(rows):,} have the same id but different content "
        f"(first: {examples}); nothing was imported. {fix}",
        path=path, line=int(rows["line"].iloc[0]) or None,
    )


def differs(a: pd.Series, b: pd.Series) -> pd.Series:
    """Element-wise ``a != b`` where two missing values are equal (never NA)."""
    a_missing, b_missing = a.isna().to_numpy(), b.isna().to_numpy()
    unequal = a.astype(object).to_numpy() != b.astype(object).to_numpy()
    return pd.Series((a_missing != b_missing) | (~a_missing & ~b_missing & unequal), index=a.index)


def short(text, n: int = 40) -> str:
    text = "" if text is None else str(text)
    return repr(text if len(text) <= n else text[:n] + "…")
