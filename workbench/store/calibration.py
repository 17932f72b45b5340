"""Tables ``calibration_samples``, ``calibration_items`` and ``label_events`` (migration 5), and
``label_answers`` (migration 11: the ids of answers stored from the Label page's write-ahead folder).

A calibration sample is drawn from a judged pool (the judge's labels are ``judgments`` rows
with source ``llm``); SME labels are ``judgments`` rows with source ``human`` and the SME as
``assessor``, plus one ``label_events`` row per action with what the judgments table does not
hold (time on task, skipped / can't judge, comment, evidence spans, whether the judge's output
was revealed after submitting). Events are append-only: an item's current state for an
annotator is its latest event, and an undo appends the state before the undone event.
"""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import Cursor, Database, insert_frame, one_row
from workbench.store.judge_configs import JOIN_SQL, KEY_SQL

ITEM_COLUMNS = ["position", "query_id", "doc_id", "chunk_id", "start", "end", "judge_judgment_id",
                "judge_grade", "stratum", "part", "weight"]


# -- samples ---------------------------------------------------------------------------------

def sample_exists(cur: Cursor, name: str) -> bool:
    row = cur.execute("SELECT count(*) FROM calibration_samples WHERE name = ?", [name]).fetchone()
    return bool(one_row(row)[0])


def write_sample(cur: Cursor, *, name: str, pool: str, seed: int, threshold: int, spec: dict, judge: dict,
                 pool_size: int, notes: list[str], items: pd.DataFrame) -> int:
    """Record a sample and its items (columns :data:`ITEM_COLUMNS`) in ``cur``'s transaction."""
    cur.execute(
        """INSERT INTO calibration_samples (name, pool, seed, threshold, spec, judge, pool_size, notes)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
        [name, pool, int(seed), int(threshold), json.dumps(spec), json.dumps(judge), int(pool_size),
         json.dumps(list(notes))],
    )
    out = items[ITEM_COLUMNS].copy()
    out.insert(0, "sample", name)
    return insert_frame(cur, "calibration_items", out)


def read_sample(db: Database, name: str) -> dict | None:
    rows = db.query_all(
        """SELECT name, pool, seed, threshold, spec::VARCHAR, judge::VARCHAR, pool_size, notes::VARCHAR,
                  created_at FROM calibration_samples WHERE name = ?""",
        [name],
    )
    if not rows:
        return None
    name, pool, seed, threshold, spec, judge, pool_size, notes, created = rows[0]
    return {"name": name, "pool": pool, "seed": int(seed), "threshold": int(threshold),
            "spec": json.loads(spec), "judge": json.loads(judge), "pool_size": int(pool_size),
            "notes": json.loads(notes), "created_at": created}


def _stored_sample(db: Database, name: str) -> dict:
    """:func:`read_sample` of a sample the caller knows exists (its services checked the name)."""
    info = read_sample(db, name)
    if info is None:
        raise LookupError(f"no calibration sample named {name!r}")
    return info


def read_samples(db: Database) -> pd.DataFrame:
    """Every sample with its item count, newest first."""
    return db.query_df(
        """SELECT s.name, s.pool, s.seed, s.created_at, count(i.position) AS items,
                  count(i.position) FILTER (WHERE i.part = 'holdout') AS holdout
           FROM calibration_samples s LEFT JOIN calibration_items i ON i.sample = s.name
           GROUP BY ALL ORDER BY s.created_at DESC, s.name"""
    )


def read_sample_items(db: Database, name: str) -> pd.DataFrame:
    return db.query_df(
        f"""SELECT {', '.join(chr(34) + c + chr(34) for c in ITEM_COLUMNS)} FROM calibration_items
            WHERE sample = ? ORDER BY position""",
        [name],
    )


def judged_pool_pairs(db: Database, pool: str, *, model: str | None = None,
                      prompt_hash: str | None = None, config: str | None = None) -> pd.DataFrame:
    """The pool's pairs that carry an ``ok`` LLM judgment, with the latest such judgment
    (optionally of one model / prompt hash / judge configuration, :mod:`workbench.store.judge_configs`)
    matched on (query_id, doc_id, chunk_id): ``query_id, doc_id, chunk_id, start, end,
    judge_judgment_id, judge_grade, judge_config``."""
    return db.query_df(
        f"""SELECT p.query_id, p.doc_id, p.chunk_id, arg_max(j.start, j.judgment_id) AS start,
                  arg_max(j."end", j.judgment_id) AS "end", max(j.judgment_id) AS judge_judgment_id,
                  arg_max(j.grade, j.judgment_id)::BIGINT AS judge_grade,
                  arg_max({KEY_SQL}, j.judgment_id) AS judge_config
           FROM pool_pairs p
           JOIN judgments j ON j.query_id = p.query_id AND j.doc_id = p.doc_id
                AND j.chunk_id IS NOT DISTINCT FROM p.chunk_id
           {JOIN_SQL}
           WHERE p.pool = ? AND j.source = 'llm' AND j.status = 'ok' AND j.grade IS NOT NULL
             AND (?::VARCHAR IS NULL OR j.model = ?) AND (?::VARCHAR IS NULL OR j.prompt_hash = ?)
             AND (?::VARCHAR IS NULL OR {KEY_SQL} = ?)
           GROUP BY p.query_id, p.doc_id, p.chunk_id
           ORDER BY p.query_id, p.doc_id, p.chunk_id""",
        [pool, model, model, prompt_hash, prompt_hash, config, config],
    )


def pool_pair_spans(db: Database, pool: str) -> pd.DataFrame:
    """Every pair of ``pool`` with the span an SME judges: ``query_id, doc_id, chunk_id, start,
    end`` (a chunk's span, else the whole document); pairs whose query, document or chunk is gone
    are left out."""
    return db.query_df(
        """SELECT p.query_id, p.doc_id, p.chunk_id,
                  coalesce(c.start, 0)::BIGINT AS start, coalesce(c."end", length(d.text))::BIGINT AS "end"
           FROM pool_pairs p
           JOIN documents d ON d.doc_id = p.doc_id
           JOIN queries q ON q.query_id = p.query_id
           LEFT JOIN chunks c ON c.chunk_id = p.chunk_id
           WHERE p.pool = ? AND (p.chunk_id IS NULL OR c.chunk_id IS NOT NULL)
           ORDER BY p.query_id, p.doc_id, p.chunk_id""", [pool])


def pool_configurations(db: Database, pool: str) -> list[str]:
    """The judge configurations with an ``ok`` grade of some pair of ``pool``, oldest first."""
    rows = db.query_all(
        f"""SELECT {KEY_SQL} AS config, min(j.judgment_id) AS first FROM pool_pairs p
            JOIN judgments j ON j.query_id = p.query_id AND j.doc_id = p.doc_id
                 AND j.chunk_id IS NOT DISTINCT FROM p.chunk_id
            {JOIN_SQL}
            WHERE p.pool = ? AND j.source = 'llm' AND j.status = 'ok' AND j.grade IS NOT NULL
            GROUP BY ALL ORDER BY first""", [pool])
    return [str(r[0]) for r in rows]


def pool_pairs_per_query(db: Database, pool: str) -> dict[str, int]:
    """``{query_id: pool pairs}`` of a pool (the query design needs every pair of a query judged)."""
    rows = db.query_all("SELECT query_id, count(*) FROM pool_pairs WHERE pool = ? GROUP BY query_id", [pool])
    return {str(q): int(n) for q, n in rows}


def query_design_samples(db: Database) -> list[str]:
    """Names of the samples drawn by the query design (``spec.design = 'queries'``), newest first."""
    rows = db.query_all(
        """SELECT name FROM calibration_samples WHERE json_extract_string(spec, '$.design') = 'queries'
           ORDER BY created_at DESC, name""")
    return [str(r[0]) for r in rows]


def few_shot_configurations(db: Database) -> dict[tuple[str, str], dict]:
    """``{(model, prompt_hash): few_shot}`` of every judge job run with few-shot examples
    (``params.few_shot``: k, sample, seed, positions; the latest job's when several)."""
    rows = db.query_all(
        """SELECT model, prompt_hash, json_extract(params, '$.few_shot')::VARCHAR FROM judge_jobs
           WHERE json_extract(params, '$.few_shot') IS NOT NULL ORDER BY job_id""")
    return {(str(m), str(h)): json.loads(f) for m, h, f in rows if f and f != "null"}


def count_pool_pairs(db: Database, pool: str) -> int:
    return int(db.query_value("SELECT count(*) FROM pool_pairs WHERE pool = ?", [pool]))


def count_judge_relevant(db: Database, sample: str, config: str | None) -> tuple[int, int]:
    """``(judge-relevant, judged)`` pairs of the sample's pool graded by judge configuration
    ``config`` (None: the latest grade of any configuration), relevant meaning grade ≥ the
    sample's threshold (the observed share Rogan–Gladen corrects)."""
    info = _stored_sample(db, sample)
    frame = judged_pool_pairs(db, info["pool"], config=config)
    return int((frame["judge_grade"] >= info["threshold"]).sum()), len(frame)


# -- what an annotator sees ------------------------------------------------------------------

def read_item(db: Database, sample: str, position: int) -> dict | None:
    """The pair at ``position`` with everything needed to label it, and nothing from the judge:
    query text/description/tags, document title and text, the span to judge."""
    rows = db.query_all(
        """SELECT i.position, i.query_id, i.doc_id, i.chunk_id, i.start, i."end", i.part,
                  q.text, q.description, q.tags::VARCHAR, d.title, d.text
           FROM calibration_items i
           LEFT JOIN queries q ON q.query_id = i.query_id
           LEFT JOIN documents d ON d.doc_id = i.doc_id
           WHERE i.sample = ? AND i.position = ?""",
        [sample, int(position)],
    )
    return _item(rows[0]) if rows else None


def read_items(db: Database, sample: str, positions) -> dict[int, dict]:
    """:func:`read_item` for several positions in one query: ``{position: item}`` (positions
    the sample does not have are absent). Nothing from the judge, as in :func:`read_item`."""
    wanted = sorted({int(p) for p in positions})
    if not wanted:
        return {}
    rows = db.query_all(
        """SELECT i.position, i.query_id, i.doc_id, i.chunk_id, i.start, i."end", i.part,
                  q.text, q.description, q.tags::VARCHAR, d.title, d.text
           FROM calibration_items i
           LEFT JOIN queries q ON q.query_id = i.query_id
           LEFT JOIN documents d ON d.doc_id = i.doc_id
           WHERE i.sample = ? AND list_contains(?::INTEGER[], i.position)""",
        [sample, wanted],
    )
    return {int(row[0]): _item(row) for row in rows}


def _item(row) -> dict:
    (position, query_id, doc_id, chunk_id, start, end, part, qtext, qdesc, tags, title, text) = row
    return {"position": int(position), "query_id": query_id, "doc_id": doc_id, "chunk_id": chunk_id,
            "start": int(start), "end": int(end), "part": part, "query": qtext, "description": qdesc,
            "tags": json.loads(tags) if tags else [], "title": title, "text": text}


def read_judge_output(db: Database, sample: str, position: int) -> dict | None:
    """The judge's label of the item (grade, reason, model): shown only after an SME submitted."""
    rows = db.query_all(
        """SELECT j.grade, j.reason, j.model, j.prompt_hash FROM calibration_items i
           JOIN judgments j ON j.judgment_id = i.judge_judgment_id
           WHERE i.sample = ? AND i.position = ?""",
        [sample, int(position)],
    )
    if not rows:
        return None
    grade, reason, model, prompt_hash = rows[0]
    return {"grade": None if grade is None else int(grade), "reason": reason, "model": model,
            "prompt_hash": prompt_hash}


def count_items(db: Database, sample: str) -> int:
    return int(db.query_value("SELECT count(*) FROM calibration_items WHERE sample = ?", [sample]))


def item_queries(db: Database, sample: str) -> list[tuple[int, str]]:
    """``(position, query_id)`` of every item of the sample, by position (no text, no grade)."""
    rows = db.query_all("SELECT position, query_id FROM calibration_items WHERE sample = ? ORDER BY position",
                        [sample])
    return [(int(p), str(q)) for p, q in rows]


# -- label events ----------------------------------------------------------------------------

_CURRENT = """
    SELECT e.event_id, e.position, e.annotator, e.action, e.grade, e.judgment_id, e.comment,
           e.evidence::VARCHAR AS evidence, e.seconds, e.revealed, e.undoes, e.created_at
    FROM label_events e
    WHERE e.sample = ? {extra}
    QUALIFY row_number() OVER (PARTITION BY e.position, e.annotator ORDER BY e.event_id DESC) = 1
"""


def current_states(db_or_cur, sample: str, annotator: str | None = None) -> pd.DataFrame:
    """The latest event per (position, annotator) (``clear`` included), by position."""
    extra, params = ("AND e.annotator = ?", [sample, annotator]) if annotator is not None else ("", [sample])
    sql = _CURRENT.format(extra=extra) + " ORDER BY e.position, e.annotator"
    if isinstance(db_or_cur, Database):
        return db_or_cur.query_df(sql, params)
    return db_or_cur.execute(sql, params).df()


def answered(db: Database, sample: str, annotator: str) -> list[tuple]:
    """The annotator's current answer to every item they answered (latest event per position,
    ``clear`` left out), by position: ``(position, action, grade, comment, evidence JSON text,
    revealed)`` tuples (no DataFrame: the Label page reads this at every key press)."""
    return db.query_all(
        """SELECT position, action, grade, comment, evidence, revealed FROM (
               SELECT e.position, e.action, e.grade, e.comment, e.evidence::VARCHAR AS evidence, e.revealed
               FROM label_events e WHERE e.sample = ? AND e.annotator = ?
               QUALIFY row_number() OVER (PARTITION BY e.position ORDER BY e.event_id DESC) = 1)
           WHERE action <> 'clear' ORDER BY position""",
        [sample, annotator],
    )


def current_state(cur: Cursor, sample: str, annotator: str, position: int) -> dict | None:
    """The latest event of the annotator on the item (None when there is none). An aggregate
    (``arg_max`` of the row by ``event_id``), not ``ORDER BY event_id DESC LIMIT 1``: DuckDB
    plans that top-1 as a late-materialising join of two scans, paid on every label stored
    (figures in docs/performance.md)."""
    row = cur.execute(
        """SELECT arg_max({'event_id': event_id, 'action': action, 'grade': grade, 'judgment_id': judgment_id},
                          event_id)
           FROM label_events WHERE sample = ? AND annotator = ? AND position = ?""",
        [sample, annotator, int(position)],
    ).fetchall()
    latest = row[0][0] if row else None
    if latest is None:
        return None
    return {"event_id": int(latest["event_id"]), "action": latest["action"], "grade": latest["grade"],
            "judgment_id": latest["judgment_id"]}


def write_event(cur: Cursor, *, sample: str, position: int, annotator: str, action: str,
                grade: int | None = None, judgment_id: int | None = None, comment: str | None = None,
                evidence: list | None = None, seconds: float | None = None, revealed: bool = False,
                undoes: int | None = None) -> int:
    row = cur.execute(
        """INSERT INTO label_events (sample, position, annotator, action, grade, judgment_id, comment,
                                     evidence, seconds, revealed, undoes)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING event_id""",
        [sample, int(position), annotator, action, grade, judgment_id, comment,
         None if evidence is None else json.dumps(evidence), seconds, bool(revealed), undoes],
    ).fetchone()
    return int(one_row(row)[0])


def answer_event(cur: Cursor, answer_id: str) -> dict | None:
    """The stored answer ``answer_id`` (table ``label_answers``): ``{"event_id", "position"}``
    (both None for an undo that found nothing to undo), None when no answer with that id was stored."""
    row = cur.execute("SELECT event_id, position FROM label_answers WHERE answer_id = ?", [answer_id]).fetchall()
    if not row:
        return None
    event_id, position = row[0]
    return {"event_id": None if event_id is None else int(event_id),
            "position": None if position is None else int(position)}


def write_answer_id(cur: Cursor, answer_id: str, event_id: int | None, position: int | None) -> None:
    """Record that answer ``answer_id`` made event ``event_id`` on pair ``position`` (in the
    storing transaction; both None: an undo that found nothing to undo)."""
    cur.execute("INSERT INTO label_answers (answer_id, event_id, position) VALUES (?, ?, ?)",
                [answer_id, None if event_id is None else int(event_id), None if position is None else int(position)])


def write_human_judgment(cur: Cursor, *, query_id: str, doc_id: str, chunk_id: str | None, start: int,
                         end: int, grade: int, assessor: str, reason: str | None) -> int:
    row = cur.execute(
        """INSERT INTO judgments (query_id, doc_id, chunk_id, start, "end", grade, source, assessor, reason)
           VALUES (?, ?, ?, ?, ?, ?, 'human', ?, ?) RETURNING judgment_id""",
        [query_id, doc_id, chunk_id, int(start), int(end), int(grade), assessor, reason],
    ).fetchone()
    return int(one_row(row)[0])


def delete_human_judgment(cur: Cursor, judgment_id: int) -> None:
    """Remove a human judgment this module wrote (a label that was changed or undone)."""
    cur.execute("DELETE FROM judgments WHERE judgment_id = ? AND source = 'human'", [int(judgment_id)])


def items_keys(cur: Cursor, sample: str, positions: list[int]) -> dict[int, dict]:
    """:func:`item_keys` of several positions in one query (positions the sample lacks are absent)."""
    rows = cur.execute(
        """SELECT position, query_id, doc_id, chunk_id, start, "end" FROM calibration_items
           WHERE sample = ? AND list_contains(?::INTEGER[], position)""",
        [sample, [int(p) for p in positions]],
    ).fetchall()
    return {int(p): {"query_id": q, "doc_id": d, "chunk_id": c, "start": int(s), "end": int(e)}
            for p, q, d, c, s, e in rows}


def current_judgment_ids(cur: Cursor, sample: str, annotator: str, positions: list[int]) -> list[int]:
    """The ``judgments`` rows the annotator's current labels of ``positions`` point at (the
    latest event per position, as :func:`current_state`, when it carries one)."""
    rows = cur.execute(
        """SELECT judgment_id FROM label_events
           WHERE sample = ? AND annotator = ? AND list_contains(?::INTEGER[], position)
           QUALIFY row_number() OVER (PARTITION BY position ORDER BY event_id DESC) = 1""",
        [sample, annotator, [int(p) for p in positions]],
    ).fetchall()
    return [int(r[0]) for r in rows if r[0] is not None]


def next_ids(cur: Cursor, sequence: str, n: int) -> list[int]:
    """``n`` values of ``sequence`` (``judgment_ids``, ``label_event_ids``), ascending."""
    if sequence not in ("judgment_ids", "label_event_ids"):
        raise ValueError(f"not a label sequence: {sequence!r}")
    rows = cur.execute(f"SELECT nextval('{sequence}') FROM range(?)", [int(n)]).fetchall()
    return sorted(int(r[0]) for r in rows)


def write_labels(cur: Cursor, *, sample: str, annotator: str, labels: pd.DataFrame) -> list[int]:
    """Human judgments and ``label`` events for ``labels`` (columns ``position``, ``grade``,
    ``seconds`` and the item keys of :func:`item_keys`), in two statements: ids are drawn from
    the sequences first, in row order, so the events and judgments are numbered as one
    :func:`write_human_judgment` and :func:`write_event` per row would number them. Returns the
    event ids."""
    n = len(labels)
    judgment_ids, event_ids = next_ids(cur, "judgment_ids", n), next_ids(cur, "label_event_ids", n)
    insert_frame(cur, "judgments", pd.DataFrame({
        "judgment_id": judgment_ids, "query_id": labels["query_id"].to_numpy(), "doc_id": labels["doc_id"].to_numpy(),
        "chunk_id": labels["chunk_id"].to_numpy(), "start": labels["start"].to_numpy(), "end": labels["end"].to_numpy(),
        "grade": labels["grade"].to_numpy(), "source": "human", "assessor": annotator, "reason": None}))
    insert_frame(cur, "label_events", pd.DataFrame({
        "event_id": event_ids, "sample": sample, "position": labels["position"].to_numpy(), "annotator": annotator,
        "action": "label", "grade": labels["grade"].to_numpy(), "judgment_id": judgment_ids,
        "seconds": labels["seconds"].to_numpy(), "revealed": False}))
    return event_ids


def delete_human_judgments(cur: Cursor, judgment_ids: list[int]) -> None:
    """:func:`delete_human_judgment` of several rows in one statement."""
    if judgment_ids:
        cur.execute("DELETE FROM judgments WHERE list_contains(?::BIGINT[], judgment_id) AND source = 'human'",
                    [[int(j) for j in judgment_ids]])


def item_keys(cur: Cursor, sample: str, position: int) -> dict | None:
    row = cur.execute(
        """SELECT query_id, doc_id, chunk_id, start, "end" FROM calibration_items
           WHERE sample = ? AND position = ?""",
        [sample, int(position)],
    ).fetchall()
    if not row:
        return None
    q, d, c, s, e = row[0]
    return {"query_id": q, "doc_id": d, "chunk_id": c, "start": int(s), "end": int(e)}


def last_undoable_event(cur: Cursor, sample: str, annotator: str) -> dict | None:
    """The annotator's latest own action (not an undo) that no undo has reverted yet."""
    row = cur.execute(
        """SELECT event_id, position FROM label_events e
           WHERE sample = ? AND annotator = ? AND undoes IS NULL
             AND NOT EXISTS (SELECT 1 FROM label_events u WHERE u.undoes = e.event_id)
           ORDER BY event_id DESC LIMIT 1""",
        [sample, annotator],
    ).fetchall()
    return None if not row else {"event_id": int(row[0][0]), "position": int(row[0][1])}


def event_before(cur: Cursor, sample: str, annotator: str, position: int, event_id: int) -> dict | None:
    """The item's state just before ``event_id`` (None when it had none)."""
    row = cur.execute(
        """SELECT action, grade, comment, evidence::VARCHAR, seconds, revealed FROM label_events
           WHERE sample = ? AND annotator = ? AND position = ? AND event_id < ?
           ORDER BY event_id DESC LIMIT 1""",
        [sample, annotator, int(position), int(event_id)],
    ).fetchall()
    if not row:
        return None
    action, grade, comment, evidence, seconds, revealed = row[0]
    return {"action": action, "grade": grade, "comment": comment,
            "evidence": None if evidence is None else json.loads(evidence), "seconds": seconds,
            "revealed": bool(revealed)}


def next_open_position(db: Database, sample: str, annotator: str, *, after: int = -1,
                       overlap: int | None = None, besides: int | None = None) -> int | None:
    """The first of :func:`next_open_positions` (None when all are done)."""
    found = next_open_positions(db, sample, annotator, after=after, overlap=overlap, besides=besides, limit=1)
    return found[0] if found else None


def next_open_positions(db: Database, sample: str, annotator: str, *, after: int = -1,
                        overlap: int | None = None, besides: int | None = None, limit: int = 1) -> list[int]:
    """The first position after ``after`` the annotator has not labelled (no state, or
    ``clear``); then, wrapping around, skipped items come back; None when all are done.

    ``overlap = k`` hands out only items that fewer than ``k`` *other* annotators have answered
    (labelled or marked can't judge), so each item collects about ``k`` answers.
    ``besides``: a position never returned (the Label page asks, before storing an answer to
    the pair on screen, which pair comes after it). Up to ``limit`` positions, in the order the
    annotator meets them when answering each in turn."""
    rows = db.query_all(
        """WITH latest AS (
               SELECT position, annotator, action FROM label_events WHERE sample = ?
               QUALIFY row_number() OVER (PARTITION BY position, annotator ORDER BY event_id DESC) = 1),
           mine AS (SELECT position, action FROM latest WHERE annotator = ?),
           others AS (SELECT position, count(*) AS answered FROM latest
                      WHERE annotator <> ? AND action IN ('label', 'cant_judge') GROUP BY position)
           SELECT i.position FROM calibration_items i
           LEFT JOIN mine c ON c.position = i.position
           LEFT JOIN others o ON o.position = i.position
           WHERE i.sample = ? AND coalesce(c.action, 'clear') IN ('clear', 'skip')
             AND (?::INTEGER IS NULL OR coalesce(o.answered, 0) < ?)
             AND (?::INTEGER IS NULL OR i.position <> ?)
           ORDER BY (coalesce(c.action, 'clear') = 'skip'), (i.position <= ?), i.position
           LIMIT ?""",
        [sample, annotator, annotator, sample, overlap, overlap, besides, besides, int(after), int(limit)],
    )
    return [int(r[0]) for r in rows]


def filled_by_others(db: Database, sample: str, annotator: str, overlap: int) -> set[int]:
    """Positions ``overlap`` or more *other* annotators have answered (latest answer a label or
    can't judge): with an overlap, these are no longer handed out (as in
    :func:`next_open_positions`)."""
    rows = db.query_all(
        """SELECT position FROM (
               SELECT position, annotator, action FROM label_events WHERE sample = ? AND annotator <> ?
               QUALIFY row_number() OVER (PARTITION BY position, annotator ORDER BY event_id DESC) = 1)
           WHERE action IN ('label', 'cant_judge') GROUP BY position HAVING count(*) >= ?""",
        [sample, annotator, int(overlap)],
    )
    return {int(r[0]) for r in rows}


def document_length(cur: Cursor, doc_id: str) -> int | None:
    """The length of a document's text (None when it has none or is gone): what bounds evidence spans."""
    row = cur.execute("SELECT length(text) FROM documents WHERE doc_id = ?", [doc_id]).fetchall()
    return None if not row or row[0][0] is None else int(row[0][0])


def label_table(db: Database, sample: str) -> pd.DataFrame:
    """Every item with every annotator's current label (one row per item and annotator that
    labelled it; items nobody labelled are absent): the items' columns, the query's ``tags``
    (JSON text), ``annotator``, ``action``, ``grade``, ``seconds``, ``revealed``."""
    return db.query_df(
        """WITH cur AS (
               SELECT position, annotator, action, grade, seconds, revealed FROM label_events
               WHERE sample = ?
               QUALIFY row_number() OVER (PARTITION BY position, annotator ORDER BY event_id DESC) = 1)
           SELECT i.position, i.query_id, i.doc_id, i.chunk_id, i.start, i."end", i.part, i.weight,
                  i.judge_grade::BIGINT AS judge_grade, i.stratum, q.tags::VARCHAR AS tags,
                  c.annotator, c.action, c.grade::BIGINT AS grade, c.seconds, c.revealed
           FROM calibration_items i
           JOIN cur c ON c.position = i.position
           LEFT JOIN queries q ON q.query_id = i.query_id
           WHERE i.sample = ? AND c.action <> 'clear'
           ORDER BY i.position, c.annotator""",
        [sample, sample],
    )


def label_notes(db: Database, sample: str) -> dict[tuple[int, str], dict]:
    """``{(position, annotator): {"comment", "evidence"}}``: what each SME's current label of an
    item says besides its grade (the comment, and the evidence spans as ``[[start, end], ...]``
    or None), for the items whose current state is a label."""
    rows = db.query_all(
        """SELECT position, annotator, action, comment, evidence FROM (
               SELECT position, annotator, action, comment, evidence::VARCHAR AS evidence FROM label_events
               WHERE sample = ?
               QUALIFY row_number() OVER (PARTITION BY position, annotator ORDER BY event_id DESC) = 1)
           WHERE action = 'label'""",
        [sample],
    )
    return {(int(p), str(a)): {"comment": c, "evidence": None if e is None else json.loads(e)}
            for p, a, _, c, e in rows}


def judgment_notes(db: Database, judgment_ids) -> dict[int, dict]:
    """``{judgment_id: {"comment", "evidence"}}`` for the SME labels among ``judgment_ids`` (a
    label's ``judgments`` row and the ``label_events`` row that wrote it share the id; rows of
    other sources have no event and are absent)."""
    wanted = sorted({int(i) for i in judgment_ids})
    if not wanted:
        return {}
    rows = db.query_all(
        """SELECT judgment_id, arg_max({'comment': comment, 'evidence': evidence::VARCHAR}, event_id)
           FROM label_events
           WHERE action = 'label' AND list_contains(?::BIGINT[], judgment_id)
           GROUP BY judgment_id""",
        [wanted],
    )
    return {int(i): {"comment": n["comment"], "evidence": None if n["evidence"] is None else json.loads(n["evidence"])}
            for i, n in rows}


def judge_grades_for_sample(db: Database, sample: str) -> pd.DataFrame:
    """Every judge configuration's latest ``ok`` grade of each sample item:
    ``position, config, model, prompt_hash, grade`` (items matched on query_id, doc_id, chunk_id;
    ``config`` as :mod:`workbench.store.judge_configs` derives it)."""
    return db.query_df(
        f"""SELECT i.position, {KEY_SQL} AS config, any_value(coalesce(j.model, '')) AS model,
                  any_value(coalesce(j.prompt_hash, '')) AS prompt_hash,
                  arg_max(j.grade, j.judgment_id)::BIGINT AS grade
           FROM calibration_items i
           JOIN judgments j ON j.query_id = i.query_id AND j.doc_id = i.doc_id
                AND j.chunk_id IS NOT DISTINCT FROM i.chunk_id
           {JOIN_SQL}
           WHERE i.sample = ? AND j.source = 'llm' AND j.status = 'ok' AND j.grade IS NOT NULL
           GROUP BY i.position, config ORDER BY config, i.position""",
        [sample],
    )


def run_judged_shares(db: Database, sample: str, k: int, config: str | None) -> pd.DataFrame:
    """Per run of the sample's pool: ``run, judged, relevant`` over its top-``k`` pooled items
    that carry a grade of judge configuration ``config`` (None: the latest of any), relevant
    meaning grade ≥ the sample's threshold."""
    info = _stored_sample(db, sample)
    return db.query_df(
        f"""WITH g AS (
               SELECT j.query_id, j.doc_id, j.chunk_id, arg_max(j.grade, j.judgment_id) AS grade
               FROM judgments j {JOIN_SQL}
               WHERE j.source = 'llm' AND j.status = 'ok' AND j.grade IS NOT NULL
                 AND (?::VARCHAR IS NULL OR {KEY_SQL} = ?)
               GROUP BY ALL)
           SELECT pv.run, count(*) AS judged, count(*) FILTER (WHERE g.grade >= ?) AS relevant
           FROM pool_provenance pv
           JOIN g ON g.query_id = pv.query_id AND g.doc_id = pv.doc_id
                AND g.chunk_id IS NOT DISTINCT FROM pv.chunk_id
           WHERE pv.pool = ? AND pv.rank <= ?
           GROUP BY pv.run ORDER BY pv.run""",
        [config, config, info["threshold"], info["pool"], int(k)],
    )


def resolutions(db: Database, sample: str) -> dict[int, dict]:
    """``{position: {"grade", "by"}}``: the current resolved label of adjudicated items and who
    resolved it (the assessor of its judgments row)."""
    rows = db.query_all(
        """SELECT e.position, e.grade, j.assessor FROM label_events e
           LEFT JOIN judgments j ON j.judgment_id = e.judgment_id
           WHERE e.sample = ? AND e.annotator = 'adjudication'
           QUALIFY row_number() OVER (PARTITION BY e.position ORDER BY e.event_id DESC) = 1""",
        [sample],
    )
    return {int(p): {"grade": int(g), "by": who} for p, g, who in rows if g is not None}


def adjudicated_judgment_ids(db: Database) -> pd.DataFrame:
    """The ``judgments`` rows that are resolved (adjudicated) labels, in every sample:
    ``judgment_id, sample, position, resolved_by``. (In ``judgments`` they are ``human`` rows
    whose assessor is the lead who resolved them; this is how to tell them from SME labels.)"""
    return db.query_df(
        """SELECT e.judgment_id, e.sample, e.position, j.assessor AS resolved_by FROM label_events e
           JOIN judgments j ON j.judgment_id = e.judgment_id
           WHERE e.annotator = 'adjudication' AND e.action = 'label'
           ORDER BY e.judgment_id"""
    )


def latest_sample_of(db: Database, annotator: str) -> str | None:
    """The sample of ``annotator``'s most recent label event (None when they have none)."""
    return db.query_value(
        "SELECT sample FROM label_events WHERE annotator = ? ORDER BY event_id DESC LIMIT 1", [annotator])


def time_on_task(db: Database, sample: str) -> pd.DataFrame:
    """Per annotator of ``sample`` (adjudications left out): ``labels`` (pairs whose current
    answer is a label), ``answers`` (pairs whose current answer is a label, a skip or can't
    judge) and ``seconds`` (the summed time on task of every answer given, undone and replaced
    ones included: the time was spent). Counting pairs, not label events, keeps a label given
    again to the same pair (replacing the first) and an undone label out of the counts: the
    counts are the labels stored. An undo's own event is neither an answer nor time on task."""
    return db.query_df(
        """WITH given AS (
               SELECT annotator, coalesce(sum(seconds), 0) AS seconds, count(seconds) AS timed
               FROM label_events
               WHERE sample = ? AND annotator <> 'adjudication' AND action <> 'clear' AND undoes IS NULL
               GROUP BY annotator),
           current AS (
               SELECT annotator, action FROM label_events WHERE sample = ? AND annotator <> 'adjudication'
               QUALIFY row_number() OVER (PARTITION BY position, annotator ORDER BY event_id DESC) = 1)
           SELECT g.annotator, coalesce(c.labels, 0) AS labels, coalesce(c.answers, 0) AS answers,
                  g.seconds, g.timed
           FROM given g
           LEFT JOIN (SELECT annotator, count(*) FILTER (WHERE action = 'label') AS labels,
                             count(*) FILTER (WHERE action <> 'clear') AS answers
                      FROM current GROUP BY annotator) c ON c.annotator = g.annotator
           ORDER BY g.annotator""",
        [sample, sample],
    )
