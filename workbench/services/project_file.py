"""The project file: open an existing project (or create one), and name the projects nearby when
the one asked for is missing.

Every front end and service opens a project this way; it sits below the services subpackages
(:mod:`workbench.services.project.lifecycle` re-exports it) so any of them may open a project
without depending on the project lifecycle.
"""

from __future__ import annotations

from pathlib import Path

from workbench.errors import StoreError
from workbench.store.database import Database


def open_project(db_path: str | Path, *, create: bool = False, wait: float = 0.0) -> Database:
    """Open an existing project, applying pending migrations; with ``create`` (``init``) a missing
    file or an empty DuckDB file becomes a new project. A file that is not a project (a DuckDB
    database of another program) is refused either way and left unchanged
    (:class:`~workbench.store.database.Database`'s ``create``). ``wait``: seconds to wait for a
    file another process holds (0: say at once that it is held, as a command does)."""
    path = Path(db_path)
    if not create and not path.exists():
        nearby = nearby_databases(path)
        found = (f"; projects nearby: {', '.join(str(p) for p in nearby)} (choose one with {{field:db PATH}})"
                 if nearby else "")
        raise StoreError(
            f"no project database at {path}; create one with {{command}} "
            f"(add {{field:demo}} for the demo project){found}", command=f"--db {path} init",
        )
    return Database(path, create=create, wait=wait)


def nearby_databases(path: str | Path, limit: int = 5) -> list[Path]:
    """DuckDB files next to ``path`` (its folder, and ``var/`` under the working directory).

    Used to say which projects exist when the one asked for does not, e.g. ``var/demo.duckdb``
    after ``make run`` when the configuration names another file.
    """
    path = Path(path)
    folders = {path.parent, Path("var")}
    found: set[Path] = set()
    for folder in folders:
        try:
            found.update(p for p in folder.glob("*.duckdb") if p.is_file())
        except OSError:
            continue
    return sorted(found)[:limit]
