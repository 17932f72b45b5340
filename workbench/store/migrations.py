"""The schema, as ordered and named migrations.

Each migration runs once, inside a transaction, and is recorded in ``schema_migrations``
(seq, name, applied_at). Opening a database made by an older version applies the missing ones
in order, so databases upgrade in place. Never edit a migration that has shipped: add a new one.

Conventions: ids are VARCHAR (``query_id``, ``doc_id``, ``chunk_id``); character offsets are
Python string offsets (Unicode code points), ``start`` inclusive and ``end`` exclusive, which is
also how DuckDB's ``substr`` counts, so ``substr(text, start + 1, end - start)`` is the chunk text.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from workbench.errors import StoreError


class Migratable(Protocol):
    """What migrating needs of :class:`workbench.store.database.Database` (which imports this
    module, so this one names the shape instead of importing it back)."""

    path: Any

    def cursor(self) -> Any: ...

    def transaction(self) -> AbstractContextManager[Any]: ...


@dataclass(frozen=True)
class Migration:
    seq: int
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "initial_corpus_runs_judgments",
        """
        CREATE TABLE documents (
            doc_id VARCHAR PRIMARY KEY,
            title VARCHAR,
            text VARCHAR NOT NULL,
            metadata JSON
        );
        CREATE TABLE queries (
            query_id VARCHAR PRIMARY KEY,
            text VARCHAR NOT NULL,
            description VARCHAR,
            tags JSON
        );
        CREATE TABLE chunkings (
            name VARCHAR PRIMARY KEY,
            strategy VARCHAR NOT NULL,
            params JSON,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        -- A chunk's text is documents.text[start:end]; it is never stored twice.
        CREATE TABLE chunks (
            chunk_id VARCHAR PRIMARY KEY,
            chunking VARCHAR NOT NULL,
            doc_id VARCHAR NOT NULL,
            seq INTEGER NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            CHECK (start >= 0 AND "end" > start)
        );
        CREATE TABLE runs (
            name VARCHAR PRIMARY KEY,
            retriever VARCHAR NOT NULL,
            stage VARCHAR,
            params JSON,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        -- chunk_id is NULL for document-level runs.
        CREATE TABLE run_rows (
            run VARCHAR NOT NULL,
            query_id VARCHAR NOT NULL,
            doc_id VARCHAR NOT NULL,
            chunk_id VARCHAR,
            rank INTEGER NOT NULL,
            score DOUBLE NOT NULL
        );
        CREATE SEQUENCE judgment_ids START 1;
        -- One row per label, anchored to a character span of a source document.
        CREATE TABLE judgments (
            judgment_id BIGINT PRIMARY KEY DEFAULT nextval('judgment_ids'),
            query_id VARCHAR NOT NULL,
            doc_id VARCHAR NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            grade TINYINT CHECK (grade IS NULL OR grade BETWEEN 0 AND 3),
            source VARCHAR NOT NULL CHECK (source IN ('llm', 'human', 'imported')),
            assessor VARCHAR NOT NULL,
            prompt_hash VARCHAR,
            model VARCHAR,
            reason VARCHAR,
            raw_response VARCHAR,
            status VARCHAR NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'invalid', 'failed')),
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            latency_ms DOUBLE,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            CHECK (start >= 0 AND "end" >= start),
            CHECK (status = 'ok' OR grade IS NULL)
        );
        """,
    ),
    Migration(
        2,
        "project_meta_and_judgment_context",
        """
        CREATE TABLE project_meta (
            key VARCHAR PRIMARY KEY,
            value VARCHAR NOT NULL
        );
        -- What the assessor was looking at when labelling (provenance only; the span is the anchor).
        ALTER TABLE judgments ADD COLUMN chunk_id VARCHAR;
        ALTER TABLE judgments ADD COLUMN error VARCHAR;
        ALTER TABLE judgments ADD COLUMN cost_usd DOUBLE;
        CREATE INDEX judgments_query_doc ON judgments (query_id, doc_id);
        CREATE INDEX chunks_by_chunking ON chunks (chunking, doc_id);
        CREATE INDEX run_rows_by_run ON run_rows (run, query_id);
        """,
    ),
    Migration(
        3,
        "imports_pools_embeddings",
        """
        -- Ledger of imported files: importing the same bytes twice is a no-op.
        CREATE SEQUENCE import_ids START 1;
        CREATE TABLE imports (
            import_id BIGINT PRIMARY KEY DEFAULT nextval('import_ids'),
            kind VARCHAR NOT NULL,
            name VARCHAR,
            path VARCHAR NOT NULL,
            format VARCHAR NOT NULL,
            sha256 VARCHAR NOT NULL,
            rows INTEGER NOT NULL,
            skipped INTEGER NOT NULL DEFAULT 0,
            imported_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            UNIQUE (kind, sha256)
        );
        -- 'chunk' runs rank chunks of one chunking; 'doc' runs rank whole documents.
        ALTER TABLE runs ADD COLUMN level VARCHAR DEFAULT 'chunk';
        ALTER TABLE runs ADD COLUMN chunking VARCHAR;
        CREATE TABLE pools (
            name VARCHAR PRIMARY KEY,
            level VARCHAR NOT NULL DEFAULT 'chunk',
            chunking VARCHAR,
            depth INTEGER NOT NULL,
            runs JSON NOT NULL,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            updated_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        -- One row per pooled (query, item); chunk_id is NULL in document-level pools.
        -- priority is the pair's fused (RRF) rank within its query: judge the lowest first.
        CREATE TABLE pool_pairs (
            pool VARCHAR NOT NULL,
            query_id VARCHAR NOT NULL,
            doc_id VARCHAR NOT NULL,
            chunk_id VARCHAR,
            priority INTEGER NOT NULL,
            rrf_score DOUBLE NOT NULL,
            added_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        -- Which run put each pair in the pool, and at which rank.
        CREATE TABLE pool_provenance (
            pool VARCHAR NOT NULL,
            query_id VARCHAR NOT NULL,
            doc_id VARCHAR NOT NULL,
            chunk_id VARCHAR,
            run VARCHAR NOT NULL,
            rank INTEGER NOT NULL
        );
        CREATE INDEX pool_pairs_by_pool ON pool_pairs (pool, query_id);
        -- Dense embeddings cached per (chunking, model), so re-running a dense retriever is free.
        CREATE TABLE embeddings (
            chunking VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            chunk_id VARCHAR NOT NULL,
            vector FLOAT[] NOT NULL
        );
        CREATE INDEX embeddings_by_key ON embeddings (chunking, model);
        """,
    ),
    Migration(
        4,
        "judge_jobs_and_samples",
        """
        -- Judge jobs (one per pool and judge configuration) and every sample they stored; ok
        -- samples are the response cache (see workbench/store/judging.py).
        CREATE SEQUENCE judge_job_ids START 1;
        CREATE TABLE judge_jobs (
            job_id BIGINT PRIMARY KEY DEFAULT nextval('judge_job_ids'),
            pool VARCHAR NOT NULL,
            judge VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            base_url VARCHAR,
            prompt_id VARCHAR NOT NULL,
            prompt_hash VARCHAR NOT NULL,
            params JSON NOT NULL,
            samples INTEGER NOT NULL DEFAULT 1,
            aggregate VARCHAR NOT NULL DEFAULT 'majority',
            config_key VARCHAR NOT NULL,
            state VARCHAR NOT NULL DEFAULT 'pending',
            total INTEGER NOT NULL DEFAULT 0,
            judged INTEGER NOT NULL DEFAULT 0,
            ok INTEGER NOT NULL DEFAULT 0,
            invalid INTEGER NOT NULL DEFAULT 0,
            failed INTEGER NOT NULL DEFAULT 0,
            cached INTEGER NOT NULL DEFAULT 0,
            sent INTEGER NOT NULL DEFAULT 0,
            http_calls INTEGER NOT NULL DEFAULT 0,
            prompt_tokens BIGINT NOT NULL DEFAULT 0,
            completion_tokens BIGINT NOT NULL DEFAULT 0,
            cost_usd DOUBLE NOT NULL DEFAULT 0,
            budget_usd DOUBLE,
            batch_id VARCHAR,
            message VARCHAR,
            pid INTEGER,
            heartbeat_at TIMESTAMP,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            started_at TIMESTAMP,
            finished_at TIMESTAMP
        );
        CREATE SEQUENCE judge_sample_ids START 1;
        CREATE TABLE judge_samples (
            sample_id BIGINT PRIMARY KEY DEFAULT nextval('judge_sample_ids'),
            job_id BIGINT NOT NULL,
            query_id VARCHAR NOT NULL,
            doc_id VARCHAR NOT NULL,
            chunk_id VARCHAR,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            sample INTEGER NOT NULL,
            cache_key VARCHAR NOT NULL,
            status VARCHAR NOT NULL CHECK (status IN ('ok', 'invalid', 'failed')),
            grade TINYINT CHECK (grade IS NULL OR grade BETWEEN 0 AND 3),
            reason VARCHAR,
            raw_response VARCHAR,
            error VARCHAR,
            probabilities VARCHAR,
            expected_grade DOUBLE,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            latency_ms DOUBLE,
            cost_usd DOUBLE,
            http_calls INTEGER,
            from_cache BOOLEAN NOT NULL DEFAULT false,
            cached_from BIGINT,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            CHECK (status = 'ok' OR grade IS NULL)
        );
        CREATE INDEX judge_samples_by_key ON judge_samples (cache_key, sample);
        CREATE INDEX judge_samples_by_job ON judge_samples (job_id, query_id);
        ALTER TABLE judgments ADD COLUMN job_id BIGINT;
        ALTER TABLE judgments ADD COLUMN samples VARCHAR;
        ALTER TABLE judgments ADD COLUMN grade_spread DOUBLE;
        ALTER TABLE judgments ADD COLUMN probabilities VARCHAR;
        ALTER TABLE judgments ADD COLUMN expected_grade DOUBLE;
        ALTER TABLE judgments ADD COLUMN cached INTEGER;
        CREATE INDEX judgments_by_job ON judgments (job_id);
        """,
    ),
    Migration(
        5,
        "calibration_samples_and_label_events",
        """
        -- A calibration sample drawn from a judged pool (see workbench/core/calibration/sample.py):
        -- the seed that drew it, the spec, and what fell short of it.
        CREATE TABLE calibration_samples (
            name VARCHAR PRIMARY KEY,
            pool VARCHAR NOT NULL,
            seed BIGINT NOT NULL,
            threshold TINYINT NOT NULL,
            spec JSON NOT NULL,
            judge JSON NOT NULL,
            pool_size INTEGER NOT NULL,
            notes JSON NOT NULL,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        -- One row per sampled pair, in labelling order (position). weight = inverse inclusion
        -- probability (re-weights sample figures to the pool); part = tuning | holdout (only the
        -- held-out part feeds the gate). judge_grade is the LLM label the sample was drawn on.
        CREATE TABLE calibration_items (
            sample VARCHAR NOT NULL,
            position INTEGER NOT NULL,
            query_id VARCHAR NOT NULL,
            doc_id VARCHAR NOT NULL,
            chunk_id VARCHAR,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            judge_judgment_id BIGINT NOT NULL,
            judge_grade TINYINT NOT NULL,
            stratum TINYINT NOT NULL,
            part VARCHAR NOT NULL CHECK (part IN ('tuning', 'holdout')),
            weight DOUBLE NOT NULL CHECK (weight > 0),
            PRIMARY KEY (sample, position)
        );
        -- Every labelling action, append-only. An event is the item's new state for that
        -- annotator: 'label' (grade, written to judgments as source 'human' too: judgment_id),
        -- 'skip', 'cant_judge' or 'clear'. An undo appends the state before the undone event
        -- with undoes = that event. seconds = time on task; revealed = the judge's output was
        -- shown after this label was submitted; evidence = [[start, end], ...] document spans.
        CREATE SEQUENCE label_event_ids START 1;
        CREATE TABLE label_events (
            event_id BIGINT PRIMARY KEY DEFAULT nextval('label_event_ids'),
            sample VARCHAR NOT NULL,
            position INTEGER NOT NULL,
            annotator VARCHAR NOT NULL,
            action VARCHAR NOT NULL CHECK (action IN ('label', 'skip', 'cant_judge', 'clear')),
            grade TINYINT CHECK (grade IS NULL OR grade BETWEEN 0 AND 3),
            judgment_id BIGINT,
            comment VARCHAR,
            evidence JSON,
            seconds DOUBLE,
            revealed BOOLEAN NOT NULL DEFAULT false,
            undoes BIGINT,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            CHECK ((action = 'label') = (grade IS NOT NULL))
        );
        CREATE INDEX label_events_by_item ON label_events (sample, annotator, position);
        """,
    ),
    Migration(
        6,
        "run_corpus_coverage",
        """
        -- How many documents the project held when the run was made (or imported). Documents
        -- are never deleted, so a run with fewer than today's count does not cover the
        -- documents imported since. NULL: a run made before this migration (unknown).
        ALTER TABLE runs ADD COLUMN corpus_documents INTEGER;
        """,
    ),
    Migration(
        7,
        "query_kinds_answerability_chains_trajectories",
        """
        -- SME decisions on whether the corpus answers a query, append-only: the latest row of a
        -- query wins over its tags (see workbench/core/rag/abstention.py).
        CREATE SEQUENCE answerability_ids START 1;
        CREATE TABLE answerability (
            decision_id BIGINT PRIMARY KEY DEFAULT nextval('answerability_ids'),
            query_id VARCHAR NOT NULL,
            answerable BOOLEAN NOT NULL,
            annotator VARCHAR NOT NULL,
            comment VARCHAR,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        -- Gold evidence chains of multi-hop queries: spans, each with the hop that should find it.
        CREATE TABLE evidence_chains (
            query_id VARCHAR NOT NULL,
            hop INTEGER NOT NULL CHECK (hop >= 1),
            doc_id VARCHAR NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            CHECK (start >= 0 AND "end" > start)
        );
        -- Agent trajectories (named sets): one row per hop, and the ranked results of its search.
        CREATE TABLE trajectory_hops (
            trajectory VARCHAR NOT NULL,
            query_id VARCHAR NOT NULL,
            hop INTEGER NOT NULL,
            searched BOOLEAN NOT NULL,
            sub_query VARCHAR
        );
        CREATE TABLE trajectory_results (
            trajectory VARCHAR NOT NULL,
            query_id VARCHAR NOT NULL,
            hop INTEGER NOT NULL,
            rank INTEGER NOT NULL,
            doc_id VARCHAR NOT NULL,
            chunk_id VARCHAR,
            start INTEGER,
            "end" INTEGER
        );
        -- Generated answers (named sets) with their abstention flag, for abstention metrics.
        CREATE TABLE answers (
            name VARCHAR NOT NULL,
            query_id VARCHAR NOT NULL,
            answer VARCHAR,
            abstained BOOLEAN NOT NULL
        );
        """,
    ),
    Migration(
        8,
        "near_duplicates_propagation_synthetic_queries",
        """
        -- Label propagation between near-duplicate chunks (workbench/core/documents/near_duplicates.py).
        -- One row per propagation run; reverted_at set when its labels were removed.
        CREATE SEQUENCE propagation_ids START 1;
        CREATE TABLE propagations (
            propagation_id BIGINT PRIMARY KEY DEFAULT nextval('propagation_ids'),
            chunking VARCHAR NOT NULL,
            source VARCHAR NOT NULL,
            threshold DOUBLE NOT NULL,
            shingle INTEGER NOT NULL,
            num_perm INTEGER NOT NULL,
            seed BIGINT NOT NULL,
            pairs INTEGER NOT NULL,
            clusters INTEGER NOT NULL,
            labels INTEGER NOT NULL,
            report JSON,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            reverted_at TIMESTAMP
        );
        -- The near-duplicate pairs a propagation found (exact Jaccard of word shingles).
        CREATE TABLE near_duplicate_pairs (
            propagation_id BIGINT NOT NULL,
            chunk_a VARCHAR NOT NULL,
            chunk_b VARCHAR NOT NULL,
            similarity DOUBLE NOT NULL
        );
        -- Propagated labels: kept apart from judgments (never a direct label); the target
        -- chunk's span, the similarity to the source chunk and the source's grade and side.
        CREATE TABLE propagated_labels (
            propagation_id BIGINT NOT NULL,
            query_id VARCHAR NOT NULL,
            doc_id VARCHAR NOT NULL,
            chunk_id VARCHAR NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            grade TINYINT NOT NULL CHECK (grade BETWEEN 0 AND 3),
            similarity DOUBLE NOT NULL,
            source_chunk_id VARCHAR NOT NULL,
            source_grade TINYINT NOT NULL
        );
        CREATE INDEX propagated_by_run ON propagated_labels (propagation_id, query_id);
        -- Synthetic questions written from a chunk (workbench/core/synthetic_queries.py): the
        -- question before and after the rewrite step, lexical overlap with the source, flag.
        CREATE TABLE synthetic_questions (
            query_id VARCHAR PRIMARY KEY,
            chunking VARCHAR NOT NULL,
            chunk_id VARCHAR NOT NULL,
            doc_id VARCHAR NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            generator VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            seed BIGINT NOT NULL,
            original VARCHAR NOT NULL,
            rewritten VARCHAR NOT NULL,
            overlap_before DOUBLE NOT NULL,
            overlap_after DOUBLE NOT NULL,
            flagged BOOLEAN NOT NULL,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        -- Generation replies by cache key (model, prompt hash, parameters, sha256 of the chunk
        -- text), the judge's key scheme: the same text is never sent twice.
        CREATE TABLE generation_cache (
            cache_key VARCHAR PRIMARY KEY,
            model VARCHAR NOT NULL,
            reply VARCHAR NOT NULL,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        """,
    ),
    Migration(
        9,
        "stored_evaluations",
        """
        -- Evaluations of stored runs against the project's qrels (workbench/services/evaluation/evaluate.py):
        -- one row per evaluation (runs, the qrels policy and fingerprint, measures), its means per
        -- run and measure, and every per-query value, so results can be compared across time.
        CREATE SEQUENCE evaluation_ids START 1;
        CREATE TABLE evaluations (
            evaluation_id BIGINT PRIMARY KEY DEFAULT nextval('evaluation_ids'),
            runs JSON NOT NULL,
            measures JSON NOT NULL,
            labels VARCHAR NOT NULL,
            level VARCHAR NOT NULL,
            chunking VARCHAR,
            qrels_policy JSON NOT NULL,
            qrels_fingerprint VARCHAR NOT NULL,
            qrels_rows BIGINT NOT NULL,
            settings JSON,
            notes JSON,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE evaluation_means (
            evaluation_id BIGINT NOT NULL,
            run VARCHAR NOT NULL,
            measure VARCHAR NOT NULL,
            value DOUBLE,
            queries BIGINT NOT NULL
        );
        CREATE TABLE evaluation_values (
            evaluation_id BIGINT NOT NULL,
            run VARCHAR NOT NULL,
            measure VARCHAR NOT NULL,
            query_id VARCHAR NOT NULL,
            value DOUBLE
        );
        """,
    ),
    Migration(
        10,
        "run_latencies",
        """
        -- Per-query latency of a run (workbench/services/evaluation/sweep.py measures our retrievers; an
        -- external run's JSONL sidecar {query_id, latency_ms} is imported): p50/p95 and the
        -- quality-versus-latency frontier are computed from these rows.
        CREATE TABLE run_latencies (
            run VARCHAR NOT NULL,
            query_id VARCHAR NOT NULL,
            latency_ms DOUBLE NOT NULL
        );
        """,
    ),
    Migration(
        11,
        "label_answer_ids",
        """
        -- The Label page keeps each answer in a write-ahead folder next to the project until the
        -- file is free (workbench/services/calibration/pending.py); each answer has a unique id,
        -- recorded here in the transaction that stores it, so a replay (a drain interrupted
        -- after its commit, two drains racing) stores each answer exactly once. event_id: the
        -- label_events row the answer made; position: the pair it touched (an undo's too; both
        -- NULL for an undo that found nothing to undo).
        CREATE TABLE label_answers (
            answer_id VARCHAR PRIMARY KEY,
            event_id BIGINT,
            position INTEGER
        );
        """,
    ),
    Migration(
        12,
        "samples_before_any_judge",
        """
        -- A calibration sample may be drawn before any judge graded its pool (a simple random
        -- sample, workbench/core/calibration/sample.py): such items have no draw-time judge
        -- judgment or grade; every judge configuration is gated on its own grades anyway
        -- (workbench/services/calibration/verdicts.py).
        ALTER TABLE calibration_items ALTER COLUMN judge_judgment_id DROP NOT NULL;
        ALTER TABLE calibration_items ALTER COLUMN judge_grade DROP NOT NULL;
        """,
    ),
    Migration(
        13,
        "background_jobs",
        """
        -- Long work a page starts runs in its own process (workbench/services/jobs): chunking,
        -- dense and hybrid retrieval, pooling, sweeps. One row per job: the typed request as
        -- JSON, its state (queued, running, stopping, stopped, failed, finished), its progress
        -- (phase, done of total in unit), the error as data (JSON of workbench.errors) and the
        -- result (JSON), the process (pid, attempt) and times. A page follows the row, so a
        -- job survives navigation and reloads; the judge keeps its own table (judge_jobs).
        CREATE TABLE background_jobs (
            job_id BIGINT PRIMARY KEY,
            kind VARCHAR NOT NULL,
            request JSON NOT NULL,
            state VARCHAR NOT NULL,
            phase VARCHAR,
            done BIGINT NOT NULL DEFAULT 0,
            total BIGINT,
            unit VARCHAR,
            message VARCHAR,
            error JSON,
            result JSON,
            pid INTEGER,
            attempt INTEGER NOT NULL DEFAULT 0,
            started_by VARCHAR,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            started_at TIMESTAMP,
            heartbeat_at TIMESTAMP,
            finished_at TIMESTAMP
        );
        """,
    ),
    Migration(
        14,
        "label_events_guidelines_version",
        """
        -- The labelling guidelines in force when an answer was given: the SHA-256 of their text
        -- (workbench/services/calibration/guidelines.py keeps each sample's versions). NULL: the
        -- sample had no guidelines then, or the event was stored before this column existed.
        ALTER TABLE label_events ADD COLUMN guidelines_sha256 VARCHAR;
        """,
    ),
    Migration(
        15,
        "pool_provenance_from_run_rows",
        """
        -- A depth-k pool's provenance is by definition each pooled run's rows with rank <= k,
        -- which run_rows already holds (a run's rows never change, and deleting a run deletes
        -- the pools that pooled it): copying them cost building a pool more than its pairs.
        -- pool_runs lists the (pool, run) whose provenance is read from run_rows at the pool's
        -- depth; pool_provenance_rows keeps provenance stored as rows (what a project made
        -- before this migration holds unless it equals that derivation, and rows written by
        -- hand). The view pool_provenance is their union, with the old table's columns, so
        -- every reader answers as before (workbench/store/pools.py).
        ALTER TABLE pool_provenance RENAME TO pool_provenance_rows;
        CREATE TABLE pool_runs (
            pool VARCHAR NOT NULL,
            run VARCHAR NOT NULL
        );
        -- Stored provenance of a pooled run that equals its derived rows (the same rows, as a
        -- multiset) is replaced by a pool_runs row; any difference keeps the stored rows.
        INSERT INTO pool_runs (pool, run)
        WITH candidates AS (
            SELECT DISTINCT s.pool, s.run, p.depth FROM pool_provenance_rows s
            JOIN pools p ON p.name = s.pool
            WHERE list_contains(CAST(p.runs AS VARCHAR[]), s.run)),
        derived AS (
            SELECT c.pool, r.run, r.query_id, r.doc_id, r.chunk_id, r.rank FROM candidates c
            JOIN run_rows r ON r.run = c.run AND r.rank <= c.depth),
        stored AS (
            SELECT s.pool, s.run, s.query_id, s.doc_id, s.chunk_id, s.rank FROM pool_provenance_rows s
            SEMI JOIN candidates c ON c.pool = s.pool AND c.run = s.run),
        differ AS (
            SELECT DISTINCT pool, run FROM (
                (SELECT * FROM stored EXCEPT ALL SELECT * FROM derived)
                UNION ALL
                (SELECT * FROM derived EXCEPT ALL SELECT * FROM stored)))
        SELECT c.pool, c.run FROM candidates c
        ANTI JOIN differ d ON d.pool = c.pool AND d.run = c.run
        ORDER BY c.pool, c.run;
        DELETE FROM pool_provenance_rows s
        WHERE EXISTS (SELECT 1 FROM pool_runs r WHERE r.pool = s.pool AND r.run = s.run);
        CREATE VIEW pool_provenance AS
            SELECT x.pool, r.query_id, r.doc_id, r.chunk_id, r.run, r.rank
            FROM pool_runs x
            JOIN pools p ON p.name = x.pool
            JOIN run_rows r ON r.run = x.run AND r.rank <= p.depth
            UNION ALL
            SELECT pool, query_id, doc_id, chunk_id, run, rank FROM pool_provenance_rows;
        """,
    ),
)


#: What :func:`project_state` finds in a DuckDB file.
PROJECT, EMPTY, FOREIGN = "project", "empty", "foreign"


def project_state(cur: Any) -> tuple[str, list[str]]:
    """Whether a DuckDB file is a workbench project, and the names of what else it holds.

    The marker of a project is its ``schema_migrations`` table recording migration 1 under its
    name: every version writes it (``tests/fixtures/db_v1.sql``, a 0.1 project, has it) in the
    transaction that creates the schema. Three answers:

    - ``PROJECT``: the marker is there (an old project still has migrations to apply);
    - ``EMPTY``: no table, view or sequence at all, except perhaps an empty workbench
      ``schema_migrations`` (an ``init`` interrupted before its first migration committed);
      only ``init`` may make it a project;
    - ``FOREIGN``: something of another program is there (its object names are returned),
      including a ``schema_migrations`` of another migration tool (other columns, other rows);
      the workbench adds nothing to such a file, whatever the command.

    Reads only: the file is left byte-identical. A project costs one small query (the
    catalogue look-up runs only when the marker is missing).
    """
    import duckdb  # deferred like the rest of the store's start-up work

    ours = True  # no schema_migrations, or one of ours (seq, name) without rows
    try:
        first = cur.execute("SELECT name FROM schema_migrations WHERE seq = 1").fetchall()
        if first == [(MIGRATIONS[0].name,)]:
            return PROJECT, []
        ours = not first and not cur.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
    except duckdb.CatalogException:  # no such table
        pass
    except duckdb.BinderException:  # a schema_migrations without our columns: another tool's
        ours = False
    names = [row[0] for row in cur.execute(
        """SELECT name FROM (
               SELECT schema_name || '.' || table_name AS name FROM duckdb_tables()
               WHERE database_name = current_database() AND NOT internal
               UNION ALL
               SELECT schema_name || '.' || view_name FROM duckdb_views()
               WHERE database_name = current_database() AND NOT internal
               UNION ALL
               SELECT schema_name || '.' || sequence_name FROM duckdb_sequences()
               WHERE database_name = current_database())
           WHERE ? OR name <> 'main.schema_migrations' ORDER BY name""", [not ours]).fetchall()]
    return (FOREIGN, [n.removeprefix("main.") for n in names]) if names else (EMPTY, [])


def applied(db: Migratable) -> list[tuple[int, str]]:
    cur = db.cursor()
    try:
        exists = cur.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_migrations'"
        ).fetchone()[0]
        if not exists:
            return []
        return cur.execute("SELECT seq, name FROM schema_migrations ORDER BY seq").fetchall()
    finally:
        cur.close()


def migrate(db: Migratable) -> list[str]:
    """Apply every migration the database has not seen yet; return their names."""

    cur = db.cursor()
    try:
        cur.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   seq INTEGER PRIMARY KEY,
                   name VARCHAR NOT NULL,
                   applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)"""
        )
        # The table exists now: read it without applied()'s information_schema look-up, which is
        # slow on a fresh instance (every project open pays this check; docs/performance.md).
        done = dict(cur.execute("SELECT seq, name FROM schema_migrations ORDER BY seq").fetchall())
    finally:
        cur.close()
    known = {m.seq: m.name for m in MIGRATIONS}
    for seq, name in done.items():
        if known.get(seq) != name:
            raise StoreError(
                f"{db.path} was written by a newer or different workbench (migration {seq} "
                f"'{name}' is unknown to this version); upgrade the workbench package"
            )
    ran = []
    for migration in MIGRATIONS:
        if migration.seq in done:
            continue
        with db.transaction() as tx:
            tx.execute(migration.sql)
            tx.execute(
                "INSERT INTO schema_migrations (seq, name) VALUES (?, ?)",
                [migration.seq, migration.name],
            )
        ran.append(migration.name)
    return ran
