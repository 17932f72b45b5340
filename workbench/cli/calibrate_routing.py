"""``workbench calibrate activate|assign|guidelines|routing``: the lead routes the SMEs' work.

``calibrate activate SAMPLE`` makes SAMPLE the one SMEs open by default on the Label page
(``--none``: no active sample). ``calibrate assign SAMPLE --annotators ann,bob,cid [--overlap K]
[--per-annotator N] [--seed S]`` hands the sample's pairs out: K annotators per pair, at most N
pairs each, in an order drawn with seed S (stored); the Label page then serves each SME only
their pairs and the project refuses answers to others (``--none``: drop the assignment, every
SME may label every pair). ``calibrate guidelines [FILE] [--sample S]`` stores a Markdown file
of labelling guidelines with the sample (default: the active sample, else the newest; FILE
default: ``[calibration] guidelines``); SMEs read them on the Label card. ``calibrate routing
[--sample S]`` prints the active sample, the sample's assignment with each SME's progress, its
guidelines' version and hash and, when the guidelines changed mid-sample, how many labels were
labelled under each version.
"""

from __future__ import annotations

import argparse

from workbench.cli import lazy
from workbench.cli.common import add_format_option, open_project_from_args, positive_int, print_json, settings_from_args
from workbench.errors import ConfigError, InputError


def _default_sample(db, given: str | None) -> str:
    if given:
        return given
    active = lazy.calibration_routing.active_sample(db)
    if active:
        return active
    samples = lazy.calibration_workflow.list_samples(db)
    if samples.empty:
        raise InputError("the project has no calibration sample; draw one with {command}",
                         command="calibrate sample --pool POOL")
    return str(samples.iloc[0]["name"])


def _activate(args: argparse.Namespace) -> int:
    if (args.sample is None) == (not args.none):
        raise ConfigError("give the SAMPLE to make active, or --none for no active sample")
    with open_project_from_args(args) as db:
        active = lazy.calibration_routing.set_active(db, None if args.none else args.sample)
    if args.format == "json":
        print_json({"active_sample": active})
    elif active is None:
        print("no active sample: the Label page opens on the sample each SME worked on last")
    else:
        print(f"active sample: {active!r} (SMEs open it by default on the Label page)")
    return 0


def _annotators(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",")]
    if not any(names):
        raise argparse.ArgumentTypeError("expected annotator ids separated by commas, e.g. ann,bob")
    return names


def _assign(args: argparse.Namespace) -> int:
    if args.none:
        if args.annotators is not None:
            raise ConfigError("--none drops the assignment; leave out --annotators")
        with open_project_from_args(args) as db:
            lazy.calibration_routing.clear_assignment(db, args.sample)
        if args.format == "json":
            print_json({"sample": args.sample, "assignment": None})
        else:
            print(f"sample {args.sample!r}: no assignment; every SME may label every pair")
        return 0
    if args.annotators is None:
        raise ConfigError("--annotators ID,ID,... names who labels the sample (or --none drops the assignment)")
    with open_project_from_args(args) as db:
        plan = lazy.calibration_routing.assign(db, args.sample, args.annotators, overlap=args.overlap,
                                               per_annotator=args.per_annotator, seed=args.seed)
    if args.format == "json":
        print_json(plan)
        return 0
    cap = "" if plan["per_annotator"] is None else f", at most {plan['per_annotator']} each"
    print(f"sample {plan['sample']!r}: {plan['covered']} of {plan['total']} pairs assigned{_queries(plan)}, "
          f"{plan['overlap']} SME{'s' if plan['overlap'] > 1 else ''} per pair{cap} (seed {plan['seed']})")
    for name in plan["annotators"]:
        whole = None if plan.get("assigned_queries") is None else len(plan["assigned_queries"].get(name, []))
        print(f"  {name}: {len(plan['assigned'][name])} pairs"
              + ("" if whole is None else f" ({whole} whole quer{'y' if whole == 1 else 'ies'})"))
    if plan["covered"] < plan["total"]:
        print(f"note: {plan['total'] - plan['covered']} pairs are assigned to nobody; raise --per-annotator or "
              f"add annotators to cover them")
    return 0


def _queries(plan: dict) -> str:
    """" (in 4 of 5 whole queries)" for a query-design sample's assignment, else ""."""
    if plan.get("unit") != "queries":
        return ""
    return f" (in {plan['queries_covered']} of {plan['queries_total']} whole queries: a query's pairs go to the same SMEs)"


def _guidelines(args: argparse.Namespace) -> int:
    path = args.file or str(settings_from_args(args).get("calibration", "guidelines") or "")
    if not path:
        raise ConfigError("give the guidelines FILE (Markdown), or set [calibration] guidelines")
    text = lazy.calibration_guidelines.read_file(path)  # checked before the project is opened
    with open_project_from_args(args) as db:
        sample = _default_sample(db, args.sample)
        record = lazy.calibration_guidelines.set_guidelines(db, sample, text, source=path)
    if args.format == "json":
        print_json({k: v for k, v in record.items() if k != "text"})
        return 0
    versions = len(record["history"]) + 1
    print(f"guidelines {path} stored with sample {sample!r} (sha256 {record['sha256'][:12]}, version {versions}); "
          f"SMEs read them on the Label card")
    return 0


def _routing(args: argparse.Namespace) -> int:
    with open_project_from_args(args) as db:
        active = lazy.calibration_routing.active_sample(db)
        sample = _default_sample(db, args.sample)
        plan = lazy.calibration_routing.assignment(db, sample)
        progress = lazy.calibration_routing.progress(db, sample) if plan else []
        guide = lazy.calibration_guidelines.guidelines(db, sample)
        under = lazy.calibration_guidelines.labelled_under(db, sample)
    body = {"active_sample": active, "sample": sample,
            "assignment": None if plan is None else {k: v for k, v in plan.items() if k != "assigned"},
            "progress": progress,
            "guidelines": None if guide is None else {k: v for k, v in guide.items() if k != "text"},
            "labelled_under": under}
    if args.format == "json":
        print_json(body)
        return 0
    print(f"active sample: {active!r}" if active else "active sample: none")
    if plan is None:
        print(f"sample {sample!r}: no assignment; every SME may label every pair ([calibration] overlap applies)")
    else:
        cap = "" if plan["per_annotator"] is None else f", at most {plan['per_annotator']} each"
        print(f"sample {sample!r}: {plan['covered']} of {plan['total']} pairs assigned{_queries(plan)}, {plan['overlap']} per "
              f"pair{cap}; set by {plan['set_by']} at {plan['set_at']}")
        for p in progress:
            print(f"  {p['annotator']}: {p['answered']} of {p['assigned']} answered, {p['open']} open")
    if guide is None:
        print("guidelines: none")
    else:
        print(f"guidelines: v{len(guide['history']) + 1}, sha256 {guide['sha256'][:12]} from "
              f"{guide.get('source') or 'the app'}, set by {guide['set_by']} at {guide['set_at']} "
              f"({len(guide['history'])} earlier version(s))")
    if under["changed"]:  # each label records the guidelines in force when it was given
        print("the guidelines changed mid-sample; labels given under each version:")
        for g in under["by_version"]:
            who = ", ".join(f"{a} {n}" for a, n in g["annotators"].items())
            print(f"  labelled under guidelines {g['words']}: {g['labels']} label{'s' if g['labels'] != 1 else ''} "
                  f"({who})")
    return 0


def register(cal_sub: argparse._SubParsersAction) -> None:
    a = cal_sub.add_parser("activate", help="the sample SMEs open by default on the Label page")
    a.add_argument("sample", nargs="?", metavar="SAMPLE", help="the calibration sample to make active")
    a.add_argument("--none", action="store_true", help="no active sample")
    add_format_option(a)
    a.set_defaults(handler=_activate)

    s = cal_sub.add_parser("assign", help="which SMEs label a sample, how many pairs each, SMEs per pair",
                           description="Hand a calibration sample's pairs out to named SMEs. The Label page "
                           "serves each SME only their pairs; answers to other pairs are refused.")
    s.add_argument("sample", metavar="SAMPLE", help="the calibration sample")
    s.add_argument("--annotators", type=_annotators, metavar="IDS",
                   help="annotator ids separated by commas (as they type them on the Label page)")
    s.add_argument("--overlap", type=positive_int, default=1, metavar="K",
                   help="SMEs per pair (default 1; at most the number of annotators)")
    s.add_argument("--per-annotator", type=positive_int, default=None, metavar="N",
                   help="pairs each SME labels at most (default: as many as the overlap needs)")
    s.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the order the pairs are handed out in (default 0; stored)")
    s.add_argument("--none", action="store_true", help="drop the sample's assignment")
    add_format_option(s)
    s.set_defaults(handler=_assign)

    g = cal_sub.add_parser("guidelines", help="store labelling guidelines (Markdown) with a sample")
    g.add_argument("file", nargs="?", metavar="FILE",
                   help="a Markdown file (default: [calibration] guidelines)")
    g.add_argument("--sample", metavar="NAME", help="the calibration sample (default: the active one, else the newest)")
    add_format_option(g)
    g.set_defaults(handler=_guidelines)

    r = cal_sub.add_parser("routing", help="the active sample, a sample's assignment and progress, its guidelines")
    r.add_argument("--sample", metavar="NAME", help="the calibration sample (default: the active one, else the newest)")
    add_format_option(r)
    r.set_defaults(handler=_routing)
