"""Waiting in tests: poll a check until it holds, with a deadline, and say what never happened.

One loop for every test that waits on another process (a judge job, the app server, a browser
page writing to the project), instead of a ``deadline``/``while``/``sleep`` copy in each file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T], *, timeout: float = 60.0, interval: float = 0.2,
               what: str | Callable[[], str] = "the awaited condition",
               tolerate: tuple[type[BaseException], ...] = ()) -> T:
    """Call ``check`` every ``interval`` seconds until it returns something truthy, and return it.

    An exception of a ``tolerate`` type counts as "not yet" (the other process holds the file this
    instant). After ``timeout`` seconds: ``AssertionError`` naming ``what`` (a callable is called
    then, to describe the state reached).
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except tolerate:
            value = None
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what() if callable(what) else what}")
        time.sleep(interval)
