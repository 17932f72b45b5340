"""``workbench judge --pool P ...``: grade a pool's pairs with the LLM judge (or the offline one).
``workbench judge learn --sample S [--from CONFIG ...] [--seed N]``: a judge learned from the SMEs'
labels of a calibration sample's tuning part (:mod:`workbench.services.judge.learned`).

Thin over :mod:`workbench.services.judge.jobs` (jobs, cache, resume, budget, batch mode are documented
there). Exit codes: 0 the job finished (failed or invalid pairs are reported, and
``--retry-failed`` judges them again); 6 the job stopped before the end (budget reached,
cancelled, or a batch still running on the server): run the same command again to continue.
"""

from __future__ import annotations

import argparse
import sys

from workbench import lazylibs
from workbench.cli import lazy
from workbench.cli.common import add_progress_option, cli_text, print_json, settings_from_args
from workbench.errors import InputError

STOPPED_EXIT = 6


def _progress(args: argparse.Namespace):
    """A callback drawing done/total, rate, ETA, cost and failures on stderr (on a terminal or
    with --progress), and a function closing the bar."""
    if getattr(args, "no_progress", False):
        return None, lambda: None

    state: dict = {}

    def on_progress(p) -> None:
        bar = state.get("bar")
        if bar is None:
            bar = state["bar"] = lazylibs.tqdm.tqdm(total=p.total, desc="judging", unit=" pairs", file=sys.stderr,
                                                    disable=None if not args.progress else False, dynamic_ncols=True,
                                                    mininterval=0.5)
        bar.total = p.total
        bar.n = p.done
        cost = "?" if p.cost_usd is None else f"${p.cost_usd:,.4f}"
        bar.set_postfix_str(f"cost {cost}, failed {p.failed}, invalid {p.invalid}, cached {p.cached}",
                            refresh=False)
        bar.refresh()

    def close() -> None:
        if state.get("bar") is not None:
            state["bar"].close()

    return on_progress, close


def _judge(args: argparse.Namespace) -> int:
    request = lazy.judge_request.from_namespace(args)  # the one request; its check runs before --estimate too
    settings = settings_from_args(args)
    spec = request.resolve(settings)
    if spec.offline and request.model != lazy.judge_request.OFFLINE:
        print("workbench judge: no OPENAI_API_KEY and the OpenAI base URL: grading with the offline-lexical "
              "baseline (not an LLM); set OPENAI_API_KEY or --base-url for an LLM judge", file=sys.stderr)
    if sum(map(bool, (args.batch, args.batch_file, args.batch_results))) > 1:
        raise InputError("--batch, --batch-file and --batch-results are three ways to batch; pass one of them")
    db_path = settings.db_path
    if args.batch_file and not args.estimate:
        print(lazy.judge_batch_files.write_batch_file(db_path, request.pool, spec, args.batch_file, limit=request.limit,
                                                      force=args.force).summary())
        return 0
    if args.estimate:
        print(lazy.judge_jobs.estimate(db_path, request.pool, spec, limit=request.limit, batch=request.batch).summary())
        return 0
    if args.batch_results:
        report = lazy.judge_batch_files.store_batch_results(db_path, request.pool, spec, args.batch_results, limit=request.limit)
        print(report.summary())
        return 0 if report.state == "finished" else STOPPED_EXIT
    on_progress, close = _progress(args)
    try:
        report = request.run(db_path, spec, on_progress=on_progress)
    finally:
        close()
    print(report.summary())
    return 0 if report.state == "finished" else STOPPED_EXIT


def _learn(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    with lazy.project_lifecycle.open_project(settings.db_path) as db:
        result = lazy.judge_learned.learn(db, args.sample, sources=args.sources or None, seed=args.seed, settings=settings,
                                          dense=lazy.judge_learned.DenseOptions(enabled=not args.no_dense))
    if args.format == "json":
        print_json(result.as_dict())
    else:
        print(cli_text(result.summary()))
    return 0


def _judge_or_learn(args: argparse.Namespace) -> int:
    if args.pool is None:
        raise InputError("{field:pool P} is required: the pool to judge (or `workbench judge learn --sample S` "
                         "to learn a judge from SME labels)")
    return _judge(args)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "judge", help="grade a pool's pairs with the LLM judge (resumable, cached, cost-capped)",
        description="Grade every pair of a pool 0-3 with an OpenAI-compatible LLM (OPENAI_API_KEY, --base-url), "
                    "or with the offline-lexical baseline when no key and no server are configured. Running it "
                    "again resumes; answers are cached by text, so nothing is paid for twice.")

    lazy.judge_request.add_arguments(p, cli_text)  # the judge options, declared once (services.judge.request.OPTIONS)
    p.add_argument("--estimate", action="store_true", help="print requests, tokens and cost, send nothing")
    p.add_argument("--batch-file", metavar="OUT.jsonl",
                   help="write the pending requests as an OpenAI Batch API input file (for vllm run-batch, the "
                        "OpenAI or Together batch endpoints); sends nothing")
    p.add_argument("--batch-results", metavar="IN.jsonl",
                   help="store a Batch API results file written for --batch-file's requests")
    p.add_argument("--force", action="store_true", help="with --batch-file: replace an existing file")
    add_progress_option(p)
    p.set_defaults(handler=_judge_or_learn)
    actions = p.add_subparsers(dest="judge_action", metavar="learn", required=False)
    learn = actions.add_parser(
        "learn", help="learn a judge from the SMEs' tuning labels and grade the pool with it (a new configuration)",
        description="Fit a small model (the average of logistic regressions and gradient boosting, each scored by "
                    "cross-validation) on "
                    "the SME labels of a calibration sample's TUNING part only, with the grades of existing judge "
                    "configurations and retrieval signals as features, choose its operating point there, and grade "
                    "every pair of the sample's pool as a new judge configuration. The held-out part never reaches "
                    "the fit: gate the result with `workbench calibrate gate --judge learned`.")
    learn.add_argument("--sample", required=True, metavar="S", help="the calibration sample whose tuning labels to learn from")
    learn.add_argument("--from", dest="sources", action="append", metavar="CONFIG",
                       help="a judge configuration whose grades are features (key, prefix or model; repeat for "
                            "several; default: every configuration that graded the pool, learned ones excepted)")
    learn.add_argument("--seed", type=int, default=0, metavar="N",
                       help="seed of the cross-validation folds and the models (default 0; part of the configuration)")
    learn.add_argument("--no-dense", action="store_true",
                       help="leave out the dense cosine feature (by default the pool's passages are encoded once "
                            "with the project's dense encoder and cached)")
    learn.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    learn.set_defaults(handler=_learn)
