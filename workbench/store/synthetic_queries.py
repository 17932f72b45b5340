"""Tables ``synthetic_questions`` and ``generation_cache`` (migration 8).

A synthetic question is also a row of ``queries`` (tagged synthetic) and a grade-3 judgment of
its chunk's span; this table keeps where it came from: the chunk, the generator and model, the
seed, the question before and after rewriting, both overlaps and the flag.
"""

from __future__ import annotations

import pandas as pd

from workbench.store.database import Cursor, Database, id_frame, insert_frame, join_frame

QUESTION_COLUMNS = ["query_id", "chunking", "chunk_id", "doc_id", "start", "end", "generator", "model", "seed",
                    "original", "rewritten", "overlap_before", "overlap_after", "flagged"]


def existing_query_ids(cur: Cursor, query_ids) -> set[str]:
    found = join_frame(cur, id_frame(query_ids), "_wanted_synth",
                       "SELECT q.query_id FROM queries q JOIN _wanted_synth w ON q.query_id = w.id")
    return set(found["query_id"].astype(str))


def write_questions(cur: Cursor, frame: pd.DataFrame) -> int:
    return insert_frame(cur, "synthetic_questions", frame[QUESTION_COLUMNS])


def read_questions(db: Database, chunking: str | None = None) -> pd.DataFrame:
    return db.query_df(
        f"""SELECT {', '.join(chr(34) + c + chr(34) for c in QUESTION_COLUMNS)}, created_at
            FROM synthetic_questions WHERE (? IS NULL OR chunking = ?) ORDER BY query_id""",
        [chunking, chunking],
    )


def synthetic_query_ids(db: Database) -> set[str]:
    """Every query made by ``workbench synth`` (the filter reports use to keep them apart)."""
    return {str(r[0]) for r in db.query_all("SELECT query_id FROM synthetic_questions")}


def all_cached_replies(db: Database) -> dict[str, str]:
    """Every stored reply by cache key (two per chunk at most: small next to the corpus)."""
    return {str(k): str(v) for k, v in db.query_all("SELECT cache_key, reply FROM generation_cache")}


def write_cache(cur: Cursor, frame: pd.DataFrame) -> int:
    """``cache_key, model, reply, prompt_tokens, completion_tokens``; keys already stored are skipped."""
    if frame.empty:
        return 0
    frame = frame.drop_duplicates("cache_key")
    have = join_frame(cur, id_frame(frame["cache_key"]), "_wanted_keys",
                      "SELECT c.cache_key FROM generation_cache c JOIN _wanted_keys w ON c.cache_key = w.id")
    fresh = frame[~frame["cache_key"].isin(set(have["cache_key"]))]
    return insert_frame(cur, "generation_cache", fresh[["cache_key", "model", "reply", "prompt_tokens",
                                                        "completion_tokens"]])
