"""The value rules operation requests share (:mod:`workbench.services.pooling.request`,
:mod:`workbench.services.calibration.request`): each refuses a value of the wrong type or range
with one line naming the field (``{field:KEY}``, worded by each front end: a flag on the command
line, ``KEY=`` in the Python API, a label on a page), since an API caller may pass anything.

A neutral module: requests of several services units use it, and it imports only
:mod:`workbench.errors`.
"""

from __future__ import annotations

from numbers import Integral, Real

from workbench.errors import ConfigError, WorkbenchError, clip


def whole(value: object, key: str, *, low: int | None = None, high: int | None = None,
          error: type[WorkbenchError] = ConfigError) -> int:
    """``value`` as an ``int`` when it is a whole number (a bool is not) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise error(f"{{field:{key}}} must be a whole number, got {clip(repr(value), quote=False)}", field=key)
    if low is not None and value < low:
        raise error(f"{{field:{key}}} must be at least {low}, got {value}", field=key)
    if high is not None and value > high:
        raise error(f"{{field:{key}}} must be at most {high:,}, got {clip(str(value), 40, quote=False)}", field=key)
    return int(value)


def share(value: object, key: str, *, error: type[WorkbenchError] = ConfigError) -> float:
    """``value`` as a ``float`` when it is a number in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise error(f"{{field:{key}}} must be a number, got {clip(repr(value), quote=False)}", field=key)
    if not 0 < value <= 1:  # NaN fails this too
        raise error(f"{{field:{key}}} must be a share in (0, 1], got {value}", field=key)
    return float(value)


def text(value: object, key: str, *, error: type[WorkbenchError] = ConfigError) -> str | None:
    """``value`` when it is None or a string."""
    if value is not None and not isinstance(value, str):
        raise error(f"{{field:{key}}} must be text, got {clip(repr(value), quote=False)}", field=key)
    return value


def names(value: object, key: str, what: str, *, error: type[WorkbenchError] = ConfigError) -> tuple[str, ...]:
    """``value`` as a tuple of non-empty names (``what``: "run names"); a single string is refused
    (it is not a list of names: ``"bm25"`` would be four)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise error(f"{{field:{key}}} must be a list of {what}, got {clip(repr(value), quote=False)}", field=key)
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise error(f"{{field:{key}}} must be a list of {what}, got the item {clip(repr(item), quote=False)}",
                        field=key)
    return tuple(value)
