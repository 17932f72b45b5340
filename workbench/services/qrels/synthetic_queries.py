"""Synthetic queries per chunk (``workbench synth``): questions a chunk answers, labelled grade 3
on the chunk's span and kept apart from real queries.

``synthesize(settings, chunking, per_chunk=K, limit=None, seed=0, max_overlap=0.3) -> SynthReport``
    1. Chunks: every chunk of ``chunking`` with text, or a seeded sample of ``limit`` of them.
    2. Questions: the judge's LLM (``[judge]`` model, base_url, temperature, timeouts, retries:
       the same :class:`~workbench.llm.client.JudgeClient` and its one retry layer) asked for K
       questions per chunk (:data:`workbench.core.synthetic_queries.GENERATE_PROMPT`), or, when
       no LLM is configured (no ``OPENAI_API_KEY`` and the OpenAI URL, or ``--model
       offline-template``), the offline template baseline, named ``offline-template`` everywhere.
    3. Rewrite: a second call asks for the same questions without the phrases they copied from
       the chunk (the offline baseline reorders them); lexical overlap with the chunk is measured
       before and after (:func:`workbench.core.synthetic_queries.overlap`), and questions still
       above ``max_overlap`` are flagged (stored, with the flag).
    4. Storage, in one transaction: each question is a query (id ``syn-`` + hash of chunking,
       chunk, position, generator, model and seed; text = the rewritten question; tags
       ``{"type": "synthetic", "synthetic": true, "chunk_id", "generator", "flagged"}``), a
       judgment of grade 3 on the chunk's span (source ``llm`` = machine-made, assessor
       ``synthetic``, model = the generator's model, reason saying it is a label by
       construction) and a ``synthetic_questions`` row. Running the same command again creates
       nothing new (the ids exist); nothing that the command did not create is changed.

Cache: replies are stored in ``generation_cache`` under the judge's key scheme (sha256 of model,
prompt hash, parameters and the sha256 of the text sent), so the same chunk is never sent twice
for the same request (only replies that could be read are cached). The project is not held open while the
model is called.

Failures: a chunk whose generation fails (server error after the retries, a reply without the
questions) creates no question; the failure and its error text are reported (``failed``,
``errors``), never turned into a question or a label. A rewrite that fails keeps the original
question, which is then measured and flagged like any other.

Reports must keep synthetic queries apart: :func:`workbench.store.synthetic_queries.synthetic_query_ids`
and :func:`workbench.core.synthetic_queries.is_synthetic` (on the tags) give the filter.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from dataclasses import dataclass, field
from urllib.parse import urlparse

import numpy as np
import pandas as pd

from workbench.config import Settings
from workbench.core import synthetic_queries as sq
from workbench.errors import ConfigError, InputError
from workbench.retrieval.bm25 import build_index, search
from workbench.services import lazy
from workbench.services.project_file import open_project
from workbench.store import synthetic_queries as store
from workbench.store.chunks import chunking_exists, read_chunks
from workbench.store.corpus import write_queries
from workbench.store.database import Database
from workbench.store.judgments import write_judgments

OFFLINE_MODELS = (sq.OFFLINE_GENERATOR, "offline-lexical")
WRITE_WAIT = 30.0


@dataclass
class SynthReport:
    chunking: str
    generator: str
    model: str
    seed: int
    chunks: int
    per_chunk: int
    created: int = 0
    existing: int = 0
    overlap_before: float | None = None
    overlap_after: float | None = None
    flagged: int = 0
    failed: int = 0
    cached: int = 0
    sent: int = 0
    errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        def pct(x):
            return "-" if x is None else f"{x:.3f}"

        what = "offline template baseline (not an LLM)" if self.generator == sq.OFFLINE_GENERATOR else \
            f"LLM {self.model}"
        lines = [f"synthetic queries for chunking {self.chunking}: {self.created:,} created from {self.chunks:,} chunks "
                 f"x {self.per_chunk} by the {what} (seed {self.seed})"
                 + (f"; {self.existing:,} already existed" if self.existing else ""),
                 f"lexical overlap with the source chunk (share of content-word 2/3-grams copied): "
                 f"{pct(self.overlap_before)} before rewriting, {pct(self.overlap_after)} after; "
                 f"{self.flagged:,} still copy too much (flagged)"]
        if self.generator != sq.OFFLINE_GENERATOR:
            lines.append(f"requests sent {self.sent:,}, answered by the cache {self.cached:,}")
        if self.failed:
            lines.append(f"{self.failed:,} chunks failed (no question made): " + "; ".join(self.errors[:3]))
        lines.append("each question is a query tagged synthetic with its chunk as a grade-3 label; keep them apart "
                     "from real queries in reports")
        return "\n".join(lines)


def _offline(model: str, base_url: str, key: str | None) -> bool:
    return model in OFFLINE_MODELS or (not key and (urlparse(base_url).hostname or "").endswith("api.openai.com"))


def _key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _text_sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _query_id(chunking: str, chunk_id: str, position: int, generator: str, model: str, seed: int) -> str:
    return "syn-" + _key(chunking, chunk_id, position, generator, model, seed)[:16]


def _sample(chunks: pd.DataFrame, limit: int | None, seed: int) -> pd.DataFrame:
    chunks = chunks[chunks["text"].map(lambda t: bool(sq.content_words(str(t))))].reset_index(drop=True)
    if limit is None or limit >= len(chunks):
        return chunks
    rows = np.sort(np.random.default_rng(seed).choice(len(chunks), size=int(limit), replace=False))
    return chunks.iloc[rows].reset_index(drop=True)


# -- the LLM path ------------------------------------------------------------------------------

def _writer_class():
    class Writer(lazy.llm_client.JudgeClient):
        """The judge's client, asked for free text instead of a grade (same retries and mode
        fallback: JSON mode where the server takes it)."""

        async def complete(self, messages: list[dict], *, max_tokens: int, seed: int) -> tuple[str, int, int]:
            body = {"model": self.config.model, "messages": messages, "temperature": self.config.temperature,
                    "max_tokens": max_tokens, "seed": seed}
            if self._mode in ("json_schema", "json_object"):
                body["response_format"] = {"type": "json_object"}
            response, _latency = await self._create(body, [0])
            usage = response.get("usage") or {}
            choices = response.get("choices") or []
            message = (choices[0].get("message") or {}) if choices and isinstance(choices[0], dict) else {}
            content = message.get("content")
            if not isinstance(content, str):
                raise sq.ReplyError("the reply has no message text")
            return content, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)

    return Writer, lazy.llm_client.describe_error


async def _llm_questions(chunks: pd.DataFrame, k: int, seed: int, judge: dict, key: str | None,
                         cache: dict[str, str], report: SynthReport) -> tuple[dict, list[dict], dict]:
    """(chunk_id -> [(original, rewritten)], cache rows to store, chunk_id -> error)."""

    Writer, describe_error = _writer_class()
    config = lazy.llm_client.ClientConfig(base_url=str(judge["base_url"]), model=str(judge["model"]),
                                          temperature=float(judge["temperature"]), timeout=float(judge.get("timeout", 60.0)),
                                          max_attempts=int(judge["max_attempts"]),
                                          backoff_initial=float(judge.get("backoff_initial", 0.5)),
                                          backoff_max=float(judge.get("backoff_max", 60.0)),
                                          response_format=str(judge.get("response_format", "auto")))
    client = Writer(config, key)
    max_tokens = max(400, 80 * k)
    params = {"temperature": config.temperature, "max_tokens": max_tokens, "k": k, "seed": seed}
    prompts = {"generate": _text_sha(sq.GENERATE_PROMPT), "rewrite": _text_sha(sq.REWRITE_PROMPT)}
    new_cache: list[dict] = []
    results: dict[str, list[tuple[str, str]]] = {}
    errors: dict[str, str] = {}
    gate = asyncio.Semaphore(max(1, int(judge.get("concurrency", 8))))

    async def ask(kind: str, messages: list[dict], text_sent: str) -> tuple[str, dict | None]:
        """The reply, and the cache row to store once the reply has been read successfully
        (None when the cache answered): an unusable reply is never cached."""
        ck = _key(config.model, prompts[kind], params, _text_sha(text_sent))
        if ck in cache:
            report.cached += 1
            return cache[ck], None
        async with gate:
            reply, p_tok, c_tok = await client.complete(messages, max_tokens=max_tokens, seed=seed)
        reply = client.scrub(reply)  # a server echoing the key never puts it in the project
        report.sent += 1
        return reply, {"cache_key": ck, "model": config.model, "reply": reply, "prompt_tokens": p_tok,
                       "completion_tokens": c_tok}

    def keep(row: dict | None) -> None:
        if row is not None:
            cache[row["cache_key"]] = row["reply"]
            new_cache.append(row)

    async def one(chunk_id: str, text: str) -> None:
        try:
            reply, row = await ask("generate", sq.generate_messages(text, k), text)
            originals = sq.parse_questions(reply, k)
            keep(row)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded as the chunk's failure
            errors[chunk_id] = client.scrub(describe_error(exc) if not isinstance(exc, sq.ReplyError)
                                            else f"invalid reply: {exc}")
            return
        try:
            sent = text + "\x1f" + "\x1e".join(originals)
            reply, row = await ask("rewrite", sq.rewrite_messages(text, originals), sent)
            rewritten = sq.parse_questions(reply, k)
            keep(row)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the originals stay, measured and flagged as they are
            rewritten = list(originals)
        results[chunk_id] = list(zip(originals, rewritten))

    try:
        await asyncio.gather(*(one(str(c), str(t)) for c, t in zip(chunks["chunk_id"], chunks["text"])))
    finally:
        await client.aclose()
    return results, new_cache, errors


# -- the service -------------------------------------------------------------------------------

def synthesize(settings: Settings, chunking: str, *, per_chunk: int, limit: int | None = None, seed: int = 0,
               max_overlap: float = sq.DEFAULT_MAX_OVERLAP, api_key: str | None = None,
               on_note=None) -> SynthReport:
    """Write, rewrite, measure and store synthetic questions (module docstring). ``on_note(text)``
    gets notes that name options as placeholders (``{field:base_url}``, :mod:`workbench.errors`)
    for the front end to word."""

    if per_chunk < 1:
        raise InputError(f"{{field:per_chunk}} must be at least 1, got {per_chunk}")
    if limit is not None and limit < 1:
        raise InputError(f"{{field:limit}} must be at least 1, got {limit}")
    if not 0.0 < max_overlap <= 1.0:
        raise InputError(f"max overlap must lie in (0, 1], got {max_overlap}")
    judge = dict(settings.values["judge"])
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY") or None
    model, base_url = str(judge["model"]).strip(), str(judge["base_url"]).strip()
    offline = _offline(model, base_url, key)
    if not offline and not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"judge.base_url {base_url!r} is not an http(s) URL")
    if offline and on_note is not None and model not in OFFLINE_MODELS:
        on_note("no OPENAI_API_KEY and the OpenAI base URL: writing template questions with the offline-template "
                "baseline (not an LLM); set OPENAI_API_KEY or {field:base_url} for an LLM")
    generator = sq.OFFLINE_GENERATOR if offline else "llm"
    model = sq.OFFLINE_GENERATOR if offline else model

    with open_project(settings.db_path) as db:
        if not chunking_exists(db, chunking):
            raise InputError(f"no chunking named {chunking!r} in the project; create it with {{command:chunk}} or "
                             f"pick one listed by {{command:status}}")
        chunks = _sample(read_chunks(db, chunking, with_text=True), limit, seed)
        cache = {} if offline else store.all_cached_replies(db)
    report = SynthReport(chunking=chunking, generator=generator, model=model, seed=seed, chunks=len(chunks),
                         per_chunk=per_chunk)
    new_cache: list[dict] = []
    if offline:
        results = {}
        for c, t in zip(chunks["chunk_id"], chunks["text"]):
            originals = sq.template_questions(str(t), per_chunk, seed)
            results[str(c)] = [(q, sq.template_rewrite(q, str(t))) for q in originals]
        errors: dict[str, str] = {}
    else:
        results, new_cache, errors = asyncio.run(_llm_questions(chunks, per_chunk, seed, judge, key, cache, report))
    report.failed = len(errors)
    report.errors = [f"{c}: {e}" for c, e in sorted(errors.items())]

    rows = []
    by_id = chunks.set_index(chunks["chunk_id"].astype(str))
    for chunk_id in sorted(results):
        chunk = by_id.loc[chunk_id]
        for position, (original, rewritten) in enumerate(results[chunk_id]):
            before, after = sq.overlap(original, str(chunk["text"])), sq.overlap(rewritten, str(chunk["text"]))
            rows.append({
                "query_id": _query_id(chunking, chunk_id, position, generator, model, seed),
                "chunking": chunking, "chunk_id": chunk_id, "doc_id": str(chunk["doc_id"]),
                "start": int(chunk["start"]), "end": int(chunk["end"]), "generator": generator, "model": model,
                "seed": int(seed), "original": original, "rewritten": rewritten, "overlap_before": before,
                "overlap_after": after, "flagged": bool(after > max_overlap),
            })
    frame = pd.DataFrame(rows, columns=store.QUESTION_COLUMNS)
    if len(frame):
        # the figures describe every question this request produced, also those stored earlier
        report.overlap_before = round(float(frame["overlap_before"].mean()), 4)
        report.overlap_after = round(float(frame["overlap_after"].mean()), 4)
        report.flagged = int(frame["flagged"].sum())
    # The model calls may take long: an app may have opened the project meanwhile, so the write
    # waits (bounded, with backoff) for its lock instead of losing the questions at once.
    with Database(settings.db_path, wait=WRITE_WAIT) as db, db.transaction() as cur:
        if len(new_cache):
            store.write_cache(cur, pd.DataFrame(new_cache))
        if len(frame):
            have = store.existing_query_ids(cur, frame["query_id"])
            report.existing = int(frame["query_id"].isin(have).sum())
            frame = frame[~frame["query_id"].isin(have)]
        if len(frame):
            write_queries(cur, pd.DataFrame({
                "query_id": frame["query_id"], "text": frame["rewritten"],
                "description": [f"synthetic question written from chunk {c} ({m})"
                                for c, m in zip(frame["chunk_id"], frame["model"])],
                "tags": [{"type": sq.SYNTHETIC_TAG, "synthetic": True, "chunk_id": c, "generator": g,
                          "flagged": bool(f)} for c, g, f in zip(frame["chunk_id"], frame["generator"],
                                                                  frame["flagged"])],
            }))
            reason = ("label by construction: the question was written from this span"
                      + (" by the offline template baseline (not an LLM)" if offline else ""))
            write_judgments(cur, pd.DataFrame({
                "query_id": frame["query_id"], "doc_id": frame["doc_id"], "start": frame["start"],
                "end": frame["end"], "grade": 3, "source": "llm", "assessor": sq.SYNTHETIC_TAG,
                "model": frame["model"], "reason": reason, "status": "ok", "chunk_id": frame["chunk_id"],
            }))
            store.write_questions(cur, frame)
    report.created = len(frame)
    return report



def bm25_baseline(db, chunking: str, *, k: int = 10) -> dict:
    """The fast first baseline synthetic queries give: BM25 over ``chunking``'s chunks, each
    synthetic question (made from this chunking) against its own chunk (grade 3), as hit@k and
    MRR@k (the metric engine's ``success@k`` is not used so that a question's one relevant chunk
    is the whole qrels: hit@k = share of questions whose chunk is in the top k, MRR@k = mean of
    1/rank within k). Computed for the questions before and after rewriting: the drop is how
    much the original wording favoured BM25. Only synthetic queries take part."""

    questions = store.read_questions(db, chunking)
    if questions.empty:
        return {"questions": 0}
    chunks = read_chunks(db, chunking, with_text=True)
    index = build_index(chunks["text"].astype(str).tolist())
    ids = chunks["chunk_id"].astype(str).to_numpy()
    qrels = {q: {c: 3} for q, c in zip(questions["query_id"], questions["chunk_id"])}
    out: dict = {"questions": len(questions), "k": k}
    for label, column in (("before", "original"), ("after", "rewritten")):
        qi, di, sc = search(index, questions[column].astype(str).tolist(), k)
        run: dict[str, dict[str, float]] = {q: {} for q in questions["query_id"]}
        qids = questions["query_id"].to_numpy()
        for a, b, s in zip(qi, di, sc):
            run[qids[a]][ids[b]] = float(s)
        run = {q: r for q, r in run.items() if r}
        if not run:
            out[label] = {"hit": 0.0, "mrr": 0.0}
            continue
        result = lazy.core_metrics_evaluation.evaluate(qrels, run, [f"success@{k}", f"RR@{k}"])
        out[label] = {"hit": result.aggregate[f"success@{k}"], "mrr": result.aggregate[f"RR@{k}"]}
    return out
