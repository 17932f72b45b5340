"""What hangs off a run or a pool by name in other tables, for :mod:`workbench.services.project.deletion`.

* a run's per-query latencies (``run_latencies``);
* a pool's judge jobs (``judge_jobs.pool``) and calibration samples (``calibration_samples.pool``)
  with their items and label events.

Kept on purpose: ``judge_samples`` (the judge's stored answers are the response cache of every
later job, keyed by the texts, not by the job or pool) and ``judgments`` (labels are spans of
documents).
"""

from __future__ import annotations

from workbench.store.database import Cursor, Database

_NAMES = "(SELECT unnest(?::VARCHAR[]))"


def count_latencies(db: Database, runs: list[str]) -> int:
    """Rows of ``run_latencies`` of ``runs``."""
    return int(db.query_value(f"SELECT count(*) FROM run_latencies WHERE run IN {_NAMES}", [list(runs)]))


def delete_latencies(cur: Cursor, runs: list[str]) -> None:
    cur.execute(f"DELETE FROM run_latencies WHERE run IN {_NAMES}", [list(runs)])


def pool_judge_jobs(db: Database, pools: list[str]) -> list[int]:
    """Ids of the judge jobs run on ``pools``, ascending."""
    frame = db.query_df(f"SELECT job_id FROM judge_jobs WHERE pool IN {_NAMES} ORDER BY job_id", [list(pools)])
    return [int(j) for j in frame["job_id"]]


def pool_calibration_samples(db: Database, pools: list[str]):
    """``name, items, sme_labels`` of the calibration samples drawn from ``pools``, by name:
    ``items`` its rows of ``calibration_items``; ``sme_labels`` the label events with a grade
    (``action = 'label'``) an SME recorded on it."""
    return db.query_df(
        f"""SELECT s.name,
                   (SELECT count(*) FROM calibration_items i WHERE i.sample = s.name) AS items,
                   (SELECT count(*) FROM label_events e WHERE e.sample = s.name AND e.action = 'label')
                       AS sme_labels,
                   (SELECT count(*) FROM label_events e WHERE e.sample = s.name) AS events
            FROM calibration_samples s WHERE s.pool IN {_NAMES} ORDER BY s.name""",
        [list(pools)],
    )


def delete_pool_dependents(cur: Cursor, pools: list[str]) -> None:
    """Delete the judge jobs and calibration samples (items, label events) of ``pools``."""
    samples = f"(SELECT name FROM calibration_samples WHERE pool IN {_NAMES})"
    cur.execute(f"DELETE FROM label_events WHERE sample IN {samples}", [list(pools)])
    cur.execute(f"DELETE FROM calibration_items WHERE sample IN {samples}", [list(pools)])
    cur.execute(f"DELETE FROM calibration_samples WHERE pool IN {_NAMES}", [list(pools)])
    cur.execute(f"DELETE FROM judge_jobs WHERE pool IN {_NAMES}", [list(pools)])
