"""The judge's spending and size limits, one rule each for every front end and the job itself:
:mod:`workbench.services.judge.request` checks a request with them and
:func:`workbench.services.judge.jobs.run_job` the values it is given."""

from __future__ import annotations

import math

from workbench.errors import ConfigError, InputError


def check_budget(value, *, setting: bool = False) -> float | None:
    """The one budget rule of every front end (``--budget``, ``budget_usd=``, the Judge page,
    ``[judge] budget_usd``): a number of dollars, 0 for no cap (returned as None); anything else,
    a negative or not finite number, is refused in one line. ``setting``: the value is the
    configured ``[judge] budget_usd`` (a :class:`ConfigError` naming it), not an option."""
    if value is None:
        return None
    subject, error = ("[judge] budget_usd", ConfigError) if setting else ("{field:budget}", InputError)
    try:
        budget = float(value)
    except (TypeError, ValueError):
        raise error(f"{subject} must be a number of dollars (0 for no cap), got {value!r}") from None
    if not (math.isfinite(budget) and budget >= 0):
        raise error(f"{subject} must be a number of dollars (0 for no cap), got {value}")
    return budget or None


def check_limit(value) -> int | None:
    """The one limit rule: None (every pair) or a whole number of pairs, at least 1."""
    if value is not None and value < 1:
        raise InputError(f"{{field:limit}} must be at least 1, got {value}")
    return value
