"""``workbench agree`` and ``workbench calibrate sample|report|gate``: the judge against the SMEs.

``workbench agree REFERENCE CANDIDATE [--threshold 2] [--seed N] [--format table|json]
[--scale 0-3|0-4] [--clip]`` compares two label files (TREC qrels or judgment/span JSONL; the
reference is the human side). ``--format json`` prints one object with the keys ``n, tpr, tnr,
precision, kappa, kappa_graded, kappa_linear, kappa_quadratic, confusion`` (rows = reference
grade, columns = candidate grade), ``ci`` (``{name: [lo, hi]}``), ``gate`` (``{"verdict",
"reasons", "more_labels_needed"}``), ``only_reference``, ``only_candidate``, and also ``msd``
(candidate − reference, leniency), ``exact``, ``threshold``, ``levels``, ``scale``, ``clipped``,
``not_labels``, ``bootstrap`` (seed, resamples, resampling unit, interval method) and ``notes``.
NaN is written as null.

``workbench calibrate sample --pool P [--size N] [--seed S] [--judge CONFIG]`` draws and stores a
calibration sample on one judge configuration's grades; ``calibrate report [--judge CONFIG]
[--format json]`` reports one configuration's agreement with the SMEs on the held-out part;
``calibrate gate [--judge CONFIG]`` gates one configuration (stored: only a configuration with
its own pass has its labels in the qrels), prints the verdict and exits 0 (pass), 1 (fail) or
2 (inconclusive); errors exit 3 or more (argparse usage errors exit 2 as well, so CI scripts
should also check that the verdict line was printed).
"""

from __future__ import annotations

import argparse
import math

from workbench.cli import calibrate_routing, lazy
from workbench.cli.common import (
    add_format_option,
    cli_text,
    open_project_from_args,
    positive_int,
    print_json,
    settings_from_args,
)


def _scale(text: str) -> int:
    if text not in ("0-3", "0-4"):
        raise argparse.ArgumentTypeError("expected 0-3 or 0-4")
    return int(text[-1])


def _thresholds(args):
    return lazy.core_calibration_gate.GateThresholds.from_settings(settings_from_args(args))


def _resamples(args) -> int:
    if getattr(args, "resamples", None) is not None:
        return args.resamples
    return int(settings_from_args(args).get("calibration", "bootstrap_resamples"))


def _threshold(args) -> int:
    if args.threshold is not None:
        return args.threshold
    return int(settings_from_args(args).get("calibration", "relevant_min_grade"))


def _f(x) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.3f}"


def _print_agreement(body: dict, header: list[str]) -> None:
    for line in header:
        print(line)
    names = [("TPR (recall of relevant)", "tpr"), ("TNR (specificity)", "tnr"), ("precision", "precision"),
             ("kappa (binary)", "kappa"), ("kappa (4-level)" if len(body["levels"]) == 4 else "kappa (graded)",
                                           "kappa_graded"),
             ("kappa linear", "kappa_linear"), ("kappa quadratic", "kappa_quadratic"),
             ("mean signed difference", "msd"), ("exact agreement", "exact")]
    ci_pct = int(round(body["bootstrap"]["confidence"] * 100))
    print(f"{'figure':<26}{'value':>8}   {ci_pct}% interval")
    for label, key in names:
        lo, hi = body["ci"][key]
        print(f"{label:<26}{_f(body[key]):>8}   [{_f(lo)}, {_f(hi)}]")
    levels = body["levels"]
    print("confusion (rows = reference grade, columns = candidate grade)")
    print("      " + "".join(f"{g:>8}" for g in levels))
    for g, row in zip(levels, body["confusion"]):
        print(f"{g:>6}" + "".join(f"{x:>8}" if isinstance(x, int) else f"{x:>8.1f}" for x in row))
    gate = body["gate"]
    print(f"gate: {gate['verdict'].upper()}")
    for reason in gate["reasons"]:
        print(f"  - {reason}")
    if gate["verdict"] == "inconclusive":
        more = gate["more_labels_needed"]
        if more is not None:  # with no count, the last reason says why
            print(f"  about {more} more labelled pairs needed to decide")
    b = body["bootstrap"]
    unit = f"queries ({b['queries']})" if b["resampling"] == "queries" else "pairs"
    print(f"intervals: {b['resamples']} BCa bootstrap resamples by {unit}, seed {b['seed']}")
    for note in body["notes"]:
        print(f"note: {note}")


def _agree(args: argparse.Namespace) -> int:
    body = lazy.calibration_workflow.agree_files(args.reference, args.candidate, threshold=_threshold(args), seed=args.seed,
                                                 scale_max=args.scale, clip=args.clip, n_boot=_resamples(args),
                                                 thresholds=_thresholds(args))
    body["notes"] = [cli_text(note) for note in body["notes"]]  # the service names options as fields
    if args.format == "json":
        print_json(body)
        return 0
    header = [
        f"reference {body['reference']} vs candidate {body['candidate']}",
        f"{body['n']} paired labels (only in reference: {body['only_reference']}, only in candidate: "
        f"{body['only_candidate']}); scale {body['scale']}; relevant = grade >= {body['threshold']}",
    ]
    _print_agreement(body, header)
    return 0


def _sample(args: argparse.Namespace) -> int:
    """Builds a :class:`~workbench.services.calibration.request.SampleRequest` (its check words the errors)."""

    request = lazy.calibration_request.SampleRequest(args.pool, size=args.size, seed=args.seed, design=args.design, queries=args.queries,
                                                     holdout_share=args.holdout_share, name=args.name, judge=args.judge, model=args.model,
                                                     prompt_hash=args.prompt_hash).check()
    with open_project_from_args(args) as db:
        summary = request.run(db, settings_from_args(args))
    if args.format == "json":
        print_json(summary)
        return 0
    grades = ", ".join(f"{g}: {c}" for g, c in summary["by_judge_grade"].items()) or "(none: no judge graded the pool yet)"
    judge = f"; drawn on the grades of judge configuration {summary['judge'][:12]}" if summary.get("judge") else ""
    if summary.get("design") == "queries":
        print(f"calibration sample {summary['name']!r} from pool {summary['pool']!r} (seed {summary['seed']}): "
              f"{summary['queries']} of {summary['population_queries']} queries drawn at random, all "
              f"{summary['size']} of their pool pairs to grade; {summary['holdout']} held out (feed the gate), "
              f"{summary['tuning']} for tuning; by judge grade {grades}{judge}")
        for note in summary["notes"]:
            print(f"note: {note}")
        return 0
    print(f"calibration sample {summary['name']!r} from pool {summary['pool']!r} (seed {summary['seed']}): "
          f"{summary['size']} pairs over {summary['queries']} queries; {summary['holdout']} held out "
          f"(feed the gate), {summary['tuning']} for tuning; by judge grade {grades}{judge}")
    for note in summary["notes"]:
        print(f"note: {note}")
    return 0


def _options(args):
    settings = settings_from_args(args)
    tags = args.high_risk if args.high_risk is not None else settings.get("calibration", "high_risk_tags")
    return lazy.calibration_workflow.ReportOptions(threshold=int(settings.get("calibration", "relevant_min_grade")),
                                                   seed=args.seed, n_boot=_resamples(args), part=getattr(args, "part", "holdout"),
                                                   weighted=not getattr(args, "unweighted", False),
                                                   high_risk_tags=tuple(t.strip() for t in tags.split(",") if t.strip()),
                                                   high_risk_rate=float(settings.get("calibration", "high_risk_min_rate")))


def _report(args: argparse.Namespace) -> int:
    with open_project_from_args(args) as db:
        body = lazy.calibration_workflow.report(db, args.sample, thresholds=_thresholds(args), options=_options(args), judge=args.judge)
        body["throughput"] = lazy.calibration_workflow.throughput(db, body["sample"])  # labels per hour of time on task, per SME
        places = lazy.calibration_workflow.query_places(db, body["sample"])  # a query-design sample: "query k of n" as the Label page says
    if args.format == "json":
        print_json(body)
        return 0
    print(f"calibration sample {body['sample']!r} (pool {body['pool']!r}): {body['labelled']} of "
          f"{body['items']} items labelled, {body['labelled_in_part']} in the {body['part']} part")
    print(f"judge configuration: {body['judge']['label']} (key {body['judge']['key']})"
          + (f"; {body['not_graded_by_judge']} labelled pairs it did not grade" if body["not_graded_by_judge"] else ""))
    for t in body["throughput"]:
        pace = "n/a" if t["labels_per_hour"] is None else f"{t['labels_per_hour']:,.0f}"
        print(f"  {t['annotator']}: {t['labels']} labels, {pace} labels per hour of time on task "
              f"({t['hours'] * 60:,.1f} min)")
    if body["agreement"] is None:
        print(f"gate: INCONCLUSIVE: no SME labels on the {body['part']} part yet")
        return 0
    _print_agreement(body["agreement"], [
        "figures re-weighted to the pool" if body["weighted"] else "figures on the sample as drawn (unweighted)"])
    if body["slices"]:
        print("by query tag:")
        for s in body["slices"]:
            risk = " (high risk)" if s["high_risk"] else ""
            print(f"  {s['tag']}{risk}: n={s['n']} TPR {_f(s['tpr'])} TNR {_f(s['tnr'])} "
                  f"kappa {_f(s['kappa'])} -> {s['verdict']}")
    if body["disagreements"]:
        print("worst disagreements (pair, query, item, SME grade, judge grade; pair n is 'Pair n' on the "
              "Label page):")
        for d in body["disagreements"]:
            place = (places or {}).get(int(d["position"]))
            print(f"  {d['position'] + 1}  {d['query_id']}  {d['chunk_id'] or d['doc_id']}  "
                  f"{d['sme_grade']}  {d['judge_grade']}" + ("" if place is None else f"  ({place.words()})"))
    sme = body["sme_agreement"]
    if sme:
        print(f"agreement among SMEs: Krippendorff alpha (ordinal) {_f(sme['alpha_ordinal'])}")
    corrected = body["corrected_prevalence"]
    if corrected:
        lo, hi = corrected["ci"]
        print(f"relevant share of the pool: judge says {_f(corrected['observed'])}, corrected "
              f"{_f(corrected['estimate'])} [{_f(lo)}, {_f(hi)}]")
    for r in body["corrected_precision"]:
        lo, hi = r["ci"]
        print(f"run {r['run']}: precision of its judged top {r['k']} ({r['judged']} pairs): judge says "
              f"{_f(r['observed'])}, corrected {_f(r['estimate'])} [{_f(lo)}, {_f(hi)}]")
    return 0


def _gate(args: argparse.Namespace) -> int:
    with open_project_from_args(args) as db:
        body = lazy.calibration_workflow.gate(db, args.sample, thresholds=_thresholds(args), options=_options(args), judge=args.judge)
    verdict = body["gate"]
    if args.format == "json":
        print_json(body)
    else:
        print(f"{verdict['verdict']}: judge configuration {body['judge']['label']} on sample {body['sample']!r}, "
              f"{body['n']} held-out labels")
        for reason in verdict["reasons"]:
            print(f"  - {reason}")
        if verdict["verdict"] == "inconclusive" and verdict["more_labels_needed"] is not None:
            print(f"  about {verdict['more_labels_needed']} more labelled pairs needed to decide")
    return lazy.core_calibration_gate.EXIT_CODES[verdict["verdict"]]


def _report_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sample", metavar="NAME", help="the calibration sample (default: the newest)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0; stored in the output)")
    p.add_argument("--high-risk", metavar="TAGS",
                   help="comma-separated query tags whose slices need TPR and TNR >= 0.90 "
                        "(default: [calibration] high_risk_tags)")
    p.add_argument("--resamples", type=positive_int, default=None, metavar="B",
                   help="bootstrap resamples (default: [calibration] bootstrap_resamples, 2000)")
    p.add_argument("--judge", metavar="CONFIG",
                   help="the judge configuration to gate: its key, a key prefix or its model (default: the one "
                        "the sample was drawn on); the verdict is stored and decides whether its labels enter "
                        "the qrels")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "agree", help="agreement of a candidate label file (the judge) with a reference (the SMEs)",
        description="TPR, TNR, precision, Cohen's kappa (binary, 4-level, linear, quadratic), the "
        "confusion matrix and the trust gate, with seeded bootstrap 95% intervals.",
    )
    p.add_argument("reference", metavar="REFERENCE", help="the human labels: TREC qrels or JSONL")
    p.add_argument("candidate", metavar="CANDIDATE", help="the labels to check (e.g. the LLM judge's)")
    p.add_argument("--threshold", type=int, default=None, metavar="G",
                   help="relevant <=> grade >= G (default: [calibration] relevant_min_grade, 2)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--resamples", type=positive_int, default=None, metavar="B",
                   help="bootstrap resamples (default: [calibration] bootstrap_resamples, 2000)")
    p.add_argument("--scale", type=_scale, default=3, metavar="0-3|0-4",
                   help="grade scale of both files (default 0-3; 0-4 for UMBRELA-style files)")
    p.add_argument("--clip", action="store_true",
                   help="lower grades above the scale to its top grade (counted in the output)")
    add_format_option(p)
    p.set_defaults(handler=_agree)

    cal = sub.add_parser("calibrate", help="calibration samples, the agreement report and the gate",
                         description="Check the LLM judge against SME labels stored in the project.")
    cal_sub = cal.add_subparsers(dest="calibrate_command", metavar="SUBCOMMAND", required=True)

    s = cal_sub.add_parser("sample", help="draw a calibration sample from a judged pool")
    s.add_argument("--pool", required=True, metavar="P", help="the judged pool to sample from")
    s.add_argument("--size", type=int, default=None, metavar="N",
                   help="pairs to draw (default: [calibration] sample_size, 200)")
    s.add_argument("--seed", type=int, default=0, metavar="S", help="sampling seed (default 0; stored)")
    s.add_argument("--design", choices=("pairs", "queries"), default="pairs",
                   help="pairs (default): pairs stratified by judge grade and query, for the gate; queries: "
                        "a random sample of --queries queries with every pool pair of each, for "
                        "judge-corrected intervals (eval/compare --labels corrected)")
    s.add_argument("--queries", type=int, default=None, metavar="N",
                   help="with --design queries: how many queries to draw")
    s.add_argument("--name", metavar="NAME", help="sample name (default POOL-seedS)")
    s.add_argument("--holdout-share", type=float, default=None, metavar="X",
                   help="share held out for the gate (default: [calibration] holdout_share, 0.75; "
                        "the rest is for tuning the judge)")
    s.add_argument("--model", metavar="M", help="use only LLM judgments of this model")
    s.add_argument("--prompt-hash", metavar="H", help="use only LLM judgments of this prompt")
    s.add_argument("--judge", metavar="CONFIG",
                   help="the judge configuration whose grades stratify the sample (key, key prefix or model); "
                        "needed when several graded the pool")
    add_format_option(s)
    s.set_defaults(handler=_sample)

    r = cal_sub.add_parser("report", help="the judge's agreement with the SMEs on the held-out part")
    _report_flags(r)
    r.add_argument("--part", choices=("holdout", "tuning", "all"), default="holdout",
                   help="which part of the sample (default holdout: the only part that gates)")
    r.add_argument("--unweighted", action="store_true",
                   help="figures on the sample as drawn instead of re-weighted to the pool")
    add_format_option(r)
    r.set_defaults(handler=_report)

    g = cal_sub.add_parser("gate", help="the trust gate; exit 0 pass, 1 fail, 2 inconclusive")
    _report_flags(g)
    add_format_option(g)
    g.set_defaults(handler=_gate)

    calibrate_routing.register(cal_sub)  # activate, assign, guidelines, routing

