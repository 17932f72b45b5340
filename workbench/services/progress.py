"""Progress reporting that services accept and front ends implement.

A *progress factory* is ``factory(description, total, unit)`` returning a context manager that
yields ``advance(n)``; services call ``advance`` as work completes. The CLI passes a tqdm bar
on stderr (rate and ETA), the app may pass ``st.progress``; :func:`no_progress` is silent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

Advance = Callable[[int], None]
ProgressFactory = Callable[[str, int | None, str], AbstractContextManager[Advance]]


@contextmanager
def no_progress(description: str, total: int | None = None, unit: str = "it") -> Iterator[Advance]:
    yield lambda n=1: None
