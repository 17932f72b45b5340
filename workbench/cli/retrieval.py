"""``workbench chunk``, ``workbench retrieve``, ``workbench pool`` and ``workbench pool-stats``.

Thin over :mod:`workbench.services.chunking`, :mod:`~workbench.services.retrieval.runs` and
:mod:`~workbench.services.pooling.pools`. Long steps draw a tqdm bar (rate and ETA) on stderr
when it is a terminal (``--progress`` forces it, ``--no-progress`` silences it). Results go to stdout.
"""

from __future__ import annotations

import argparse
import json
import math

from workbench.cli import lazy
from workbench.cli.common import add_progress_option, cli_text, progress_from_args, settings_from_args
from workbench.errors import InputError


def _names(text: str | None, flag: str) -> list[str]:
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if not names:
        raise InputError(f"{flag} needs a comma-separated list of run names, like {flag} bm25,dense")
    return names


def _open(args: argparse.Namespace):
    return lazy.project_lifecycle.open_project(settings_from_args(args).db_path)


# -- chunk -------------------------------------------------------------------------------------
def _chunk(args: argparse.Namespace) -> int:
    with _open(args) as db:
        s = lazy.chunking.create_chunking(db, args.name, args.strategy, size=args.size, overlap=args.overlap,
                                          unit=args.unit, progress=progress_from_args(args))
    params = ", ".join(f"{k}={v}" for k, v in s.params.items()) or "no parameters"
    print(f"chunking {s.name!r} ({s.strategy}: {params}): {s.chunks:,} chunks from "
          f"{s.documents:,} documents (per document min {s.chunks_per_doc['min']}, "
          f"mean {s.chunks_per_doc['mean']:.1f}, max {s.chunks_per_doc['max']}) in {s.seconds:.2f}s")
    return 0


# -- retrieve ----------------------------------------------------------------------------------
def _print_run(s) -> None:
    extra = "".join(f", {k} {v:,}" if isinstance(v, int) else f", {k} {v}" for k, v in s.stats.items())
    scope = f"chunking {s.chunking!r}" if s.chunking else "documents"
    latency = (f"; latency per query p50 {s.latency_p50_ms:.2f} ms, p95 {s.latency_p95_ms:.2f} ms"
               if not math.isnan(s.latency_p95_ms) else "; latency not recorded")
    print(f"run {s.name!r} ({s.retriever}, {scope}): {s.rows:,} rows for {s.queries:,} queries "
          f"in {s.seconds:.2f}s{extra}{latency}")


def _retrieve(args: argparse.Namespace) -> int:
    """Any retriever of the registry: its flags are its parameters (:func:`_add_retriever`)."""

    spec = lazy.retrieval_registry.retriever(args.retriever)
    values = {}
    for p in spec.parameters:
        value = getattr(args, p.name)
        if p.type is tuple:
            value = tuple(_names(value, p.flag))
        values[p.name] = value
    options = lazy.retrieval_registry.make_options(spec.name, values)
    with _open(args) as db:
        _print_run(lazy.retrieval_registry.run_retriever(db, spec.name, name=args.name, chunking=args.chunking, k=args.k, options=options,
                                                         progress=progress_from_args(args)))
    return 0


def _list(args: argparse.Namespace) -> int:
    with _open(args) as db:
        runs = lazy.retrieval_runs.list_runs(db)

    def ms(value):
        return None if math.isnan(value) else float(value)  # NaN: no latency stored

    records = [{"name": r.name, "retriever": r.retriever, "level": r.level,
                "chunking": r.chunking if isinstance(r.chunking, str) else None,
                "queries": int(r.queries), "rows": int(r.rows), "timed_queries": int(r.timed_queries),
                "latency_ms": {"p50": ms(r.latency_p50_ms), "p95": ms(r.latency_p95_ms)}}
               for r in runs.itertuples(index=False)]
    if args.format == "json":
        for r in records:  # microseconds are the finest a latency means here
            r["latency_ms"] = {p: None if v is None else round(v, 3) for p, v in r["latency_ms"].items()}
        print(json.dumps({"runs": records}, indent=2))
        return 0
    if not records:
        print("no run yet: run a retriever (`workbench retrieve bm25 --chunking NAME --name RUN`)")
        return 0
    header = ("run", "retriever", "level", "chunking", "queries", "rows", "p50 ms", "p95 ms")
    table = [header] + [(r["name"], r["retriever"], r["level"], r["chunking"] or "-", f"{r['queries']:,}",
                         f"{r['rows']:,}",
                         *(f"{r['latency_ms'][p]:.2f}" if r["latency_ms"][p] is not None else "not recorded"
                           for p in ("p50", "p95")))
                        for r in records]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(str(v).ljust(w) if i < 4 else str(v).rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
    return 0


# -- pool --------------------------------------------------------------------------------------
def _pool(args: argparse.Namespace) -> int:
    """Builds a :class:`~workbench.services.pooling.request.PoolRequest` (its check words the errors)."""

    if args.stats:
        return _pool_stats(args)
    runs = tuple(n.strip() for n in (args.runs or "").split(",") if n.strip())
    request = lazy.pooling_request.PoolRequest(args.name, runs, args.depth, add=args.add).check()
    with _open(args) as db:
        s = request.run(db, settings_from_args(args), progress=progress_from_args(args))
    if request.add:
        print(f"pool {s.name!r}: added runs {list(runs)} at depth {s.depth}: {s.pairs_added:,} new pairs, "
              f"{s.provenance_added:,} provenance rows; {s.pairs_total:,} pairs over {s.queries:,} queries "
              f"in {s.seconds:.2f}s")
    else:
        print(f"pool {s.name!r} ({s.level}, depth {s.depth}, runs {', '.join(s.runs)}): "
              f"{s.pairs_total:,} pairs over {s.queries:,} queries, {s.provenance_added:,} "
              f"provenance rows in {s.seconds:.2f}s")
    _print_notes(s.notes)
    return 0


def _print_notes(notes) -> None:
    for note in notes:
        print(f"note: {note}")


def _pool_stats(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    with _open(args) as db:
        st = lazy.pooling_pools.pool_stats(db, args.name, k=args.k,
                                           min_overlap=settings.get("evaluation", "min_overlap"),
                                           relevance_threshold=settings.get("evaluation", "relevance_threshold"))
    if args.format == "json":
        print(json.dumps({
            "pool": {k: v for k, v in st.pool.items() if k not in ("created_at", "updated_at")},
            "k": st.k,
            "summary": st.summary,
            "sizes": st.sizes.to_dict(orient="records"),
            "contributions": st.contributions.to_dict(orient="records"),
            "overlap": st.overlap.to_dict(orient="records"),
            "judged_at_k": st.judged.to_dict(orient="records"),
            "leave_one_run_out": st.leave_one_out.to_dict(orient="records"),
        }, indent=2, default=float))
        return 0
    p, s = st.pool, st.summary
    print(f"pool {p['name']!r} ({p['level']}, chunking {p['chunking']}, depth {p['depth']}, runs {', '.join(p['runs'])})")
    print(f"  {s['pairs']:,} pairs over {s['queries']:,} queries (per query min {s['min_pool_size']}, "
          f"mean {s['mean_pool_size']:.1f}, max {s['max_pool_size']}); judged {s['judged_pairs']:,}, "
          f"unjudged {s['unjudged_pairs']:,}")
    print(f"  judged by the {s['qrels_policy']}")
    _print_notes(s["coverage_notes"])
    sections = [
        ("contributions per run (pooled pairs, only this run)", st.contributions),
        ("pairwise overlap of pooled pairs", st.overlap),
        (f"judged@{st.k} per run (current labels)", st.judged),
        (f"leave-one-run-out (P@{st.k} with and without the run's unique pairs judged)", st.leave_one_out),
    ]
    for title, frame in sections:
        print(f"\n{title}:")
        print(frame.to_string(index=False, float_format=lambda v: f"{v:.4f}") if len(frame) else "  (none)")
    return 0


def _add_retriever(rsub, spec) -> None:
    """``workbench retrieve NAME``, generated from the registry entry ``spec``: the common flags
    (``--chunking``, ``--name``, ``--k``, progress), then one flag per parameter."""
    q = rsub.add_parser(spec.name, help=spec.help)
    q.add_argument("--chunking", required=spec.chunking == "required", help="chunking to retrieve from")
    q.add_argument("--name", required=True, help="name of the new run")
    q.add_argument("--k", type=int, default=100, help="results per query (default 100)")
    add_progress_option(q)
    for p in spec.parameters:
        kwargs: dict = {"help": cli_text(p.help)}  # help may name other parameters as {field:KEY}
        if p.required:
            kwargs["required"] = True
        else:
            kwargs["default"] = p.default
        if p.type is bool:  # --NAME / --no-NAME
            kwargs["action"] = argparse.BooleanOptionalAction
        elif p.type in (int, float):
            kwargs["type"] = p.type
        if p.choices:
            kwargs["choices"] = p.choices
        if p.metavar:
            kwargs["metavar"] = p.metavar
        q.add_argument(p.flag, **kwargs)
    q.set_defaults(handler=_retrieve)


def register(sub: argparse._SubParsersAction) -> None:
    # Choices from modules that import nothing heavy: building the parser must stay cheap.

    p = sub.add_parser("chunk", help="chunk every document into a new named chunking")
    p.add_argument("--name", required=True, help="chunking name (letters, digits, _ - .)")
    p.add_argument("--strategy", required=True, choices=lazy.core_option_names.CHUNKING_STRATEGIES)
    p.add_argument("--size", type=int, help="fixed: characters per window (default 1000); section: max "
                   "characters (default 2000); sentences: sentences per window (default 5)")
    p.add_argument("--overlap", type=int, help="overlap between windows, in the unit of --size (default 0)")
    p.add_argument("--unit", choices=["chars", "tokens"], help="fixed strategy only: unit of --size")
    add_progress_option(p)
    p.set_defaults(handler=_chunk)

    p = sub.add_parser("retrieve", help="run a retriever over a chunking and store the run (list: the stored runs)")
    rsub = p.add_subparsers(dest="retriever", metavar="RETRIEVER", required=True)

    for spec in lazy.retrieval_registry.RETRIEVERS.values():
        _add_retriever(rsub, spec)

    q = rsub.add_parser("list", help="list the stored runs with their per-query latency p50/p95")
    q.add_argument("--format", choices=["table", "json"], default="table")
    q.set_defaults(handler=_list)

    p = sub.add_parser("pool", help="build a depth-k judgment pool over runs (or --add runs to one)")
    p.add_argument("--name", required=True, help="pool name")
    p.add_argument("--runs", help="runs to pool, comma-separated")
    p.add_argument("--depth", type=int, help="top-k of each run to pool (default: [pool] depth, 20)")
    p.add_argument("--add", action="store_true", help="add --runs to the existing pool --name")
    p.add_argument("--stats", action="store_true", help="show the pool's statistics instead (as pool-stats)")
    p.add_argument("--k", type=int, default=10, help="cutoff for judged@k and leave-one-out (with --stats)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    add_progress_option(p)
    p.set_defaults(handler=_pool)

    p = sub.add_parser("pool-stats", help="pool size, contributions, overlap, judged@k, leave-one-run-out")
    p.add_argument("--name", required=True, help="pool name")
    p.add_argument("--k", type=int, default=10, help="cutoff for judged@k and leave-one-out (default 10)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(handler=_pool_stats)
