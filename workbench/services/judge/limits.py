"""The judge's spending and size limits, one rule each for every front end and the job itself:
:mod:`workbench.services.judge.request` checks a request with them and
:func:`workbench.services.judge.jobs.run_job` the values it is given."""

from __future__ import annotations

import math

from workbench.errors import InputError


def check_budget(value) -> float | None:
    """The one budget rule of every front end (``--budget``, ``budget_usd=``, the Judge page,
    ``[judge] budget_usd``): a number of dollars, 0 for no cap (returned as None); anything else,
    a negative or not finite number, is refused in one line."""
    if value is None:
        return None
    try:
        budget = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{{field:budget}} must be a number of dollars (0 for no cap), got {value!r}") from None
    if not (math.isfinite(budget) and budget >= 0):
        raise InputError(f"{{field:budget}} must be a number of dollars (0 for no cap), got {value}")
    return budget or None


def check_limit(value) -> int | None:
    """The one limit rule: None (every pair) or a whole number of pairs, at least 1."""
    if value is not None and value < 1:
        raise InputError(f"{{field:limit}} must be at least 1, got {value}")
    return value
