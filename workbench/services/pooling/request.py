"""One pooling request for every front end: the frozen :class:`PoolRequest`, its one check
(:meth:`PoolRequest.check`) and its one resolution (:meth:`PoolRequest.resolve`).

``workbench pool``, ``Project.pool`` and the Retrieve & Pool page only *build* a request and
:meth:`PoolRequest.run` it; none of them checks the values itself. The rules, each one line
naming its field (``{field:KEY}``, worded by each front end):

- ``name``: required, and a new pool's name follows the project's name rule
  (:func:`workbench.core.formats.names.check_name`);
- ``runs``: a list of one or more run names (a single string is refused, not split);
- ``depth``: None (a new pool: ``[pool] depth``) or a whole number in ``[1, pools.MAX_DEPTH]``
  (:func:`~workbench.services.pooling.pools.check_depth`); with ``add`` it must be None (runs
  join the pool at its own depth);
- ``add``: True or False.

What needs the project (a run that does not exist, a pool name already taken, runs of
another level or chunking) is refused by :func:`workbench.services.pooling.pools.build_pool`
and :func:`~workbench.services.pooling.pools.add_runs`, which :meth:`PoolRequest.run` calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from workbench.config import DEFAULTS
from workbench.core.formats.names import check_name
from workbench.errors import InputError, clip
from workbench.services.pooling.pools import PoolSummary, add_runs, build_pool, check_depth
from workbench.services.progress import no_progress
from workbench.services.request_values import names, text

if TYPE_CHECKING:
    from workbench.config import Settings
    from workbench.services.progress import ProgressFactory
    from workbench.store.database import Database

@dataclass(frozen=True)
class PoolRequest:
    """What a pooling is asked to do: a new pool ``name`` of ``runs`` at ``depth`` (None: the
    configured ``[pool] depth``), or with ``add`` the ``runs`` added to the existing pool
    ``name`` at its own depth. See the module doc for the rules."""

    name: str
    runs: tuple[str, ...]
    depth: int | None = None
    add: bool = False

    def __post_init__(self) -> None:
        runs = self.runs
        if not isinstance(runs, (str, bytes, tuple)) and isinstance(runs, Iterable):  # a list, a Series...
            object.__setattr__(self, "runs", tuple(runs))  # kept hashable and frozen

    # -- the one check ---------------------------------------------------------------------------
    def check(self) -> PoolRequest:
        """Refuse a request that breaks a rule of the module doc (one line naming the field);
        returns the request, so a front end can write ``PoolRequest(...).check()``."""
        if not isinstance(self.add, bool):
            raise InputError(f"{{field:add}} must be True or False, got {clip(repr(self.add), quote=False)}",
                             field="add")
        text(self.name, "name", error=InputError)
        if not self.name or not self.name.strip():
            raise InputError("name the pool: {set_field:name}", field="name")
        if not self.add:
            check_name(self.name, "pool", "choose another {field}", field="name")
        if not self.runs:
            raise InputError("choose one or more {field:runs} to pool", field="runs")
        names(self.runs, "runs", "run names", error=InputError)
        if len(set(self.runs)) != len(self.runs):
            raise InputError(f"{{field:runs}} lists a run twice: {', '.join(self.runs)}", field="runs")
        if self.add and self.depth is not None:
            raise InputError("{field:add True} keeps the pool's own depth; leave {field:depth} out",
                             field=("add", "depth"))
        if self.depth is not None:
            check_depth(self.depth)
        return self

    # -- the one resolution ------------------------------------------------------------------------
    def resolve(self, settings: Settings | None = None) -> PoolRequest:
        """The checked request with its depth decided: a new pool without ``depth`` takes
        ``[pool] depth`` of ``settings`` (checked by the same rule); ``add`` keeps None (the
        pool's own depth)."""
        self.check()
        if self.add or self.depth is not None:
            return replace(self, depth=None if self.add else check_depth(self.depth))
        configured = DEFAULTS["pool"]["depth"] if settings is None else settings.get("pool", "depth")
        return replace(self, depth=check_depth(configured))

    def run(self, db: Database, settings: Settings | None = None, *,
            progress: ProgressFactory | None = None) -> PoolSummary:
        """Build the pool (or add the runs) as :meth:`resolve` decides:
        :func:`~workbench.services.pooling.pools.build_pool` or
        :func:`~workbench.services.pooling.pools.add_runs`."""
        resolved = self.resolve(settings)
        if resolved.add:
            return add_runs(db, resolved.name, list(resolved.runs))
        return build_pool(db, resolved.name, list(resolved.runs), int(resolved.depth),
                          progress=progress or no_progress)
