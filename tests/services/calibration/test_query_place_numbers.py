"""Where a pair stands in a query-design sample, the same in the CLI and on the Label page:
``calibrate report`` lists each worst disagreement with "Pair n"'s number and, for a query sample,
"(query k of n · pair j of m of this query)"; the Label page's card says the same for that pair.
A pair-design sample has no query place in either."""

from __future__ import annotations

import re

from tests.conftest import run_cli
from tests.support.calibration_project import build_project, judge_grades
from workbench.services.calibration import workflow as cal
from workbench.store import calibration as store
from workbench.ui.views.label import pair_html

LINE = re.compile(r"^  (\d+)  (\S+)  (\S+)  (\d)  (\d)(?:  \((.*)\))?$")


def _labelled(path, design: str):
    db, _ = build_project(path)
    if design == "queries":
        cal.create_sample(db, "s", "p", design="queries", queries=3, seed=5)
    else:
        cal.create_sample(db, "s", "p", seed=5)
    judge = judge_grades(db)
    for row in store.read_sample_items(db, "s").itertuples(index=False):
        # the SME always disagrees with the judge: every pair is a disagreement candidate
        cal.save_label(db, "s", "sme", int(row.position), 3 - judge[(row.query_id, row.doc_id)])
    return db


def _report_lines(path) -> list[re.Match]:
    proc = run_cli("--db", str(path), "calibrate", "report", "--sample", "s", "--resamples", "50",
                   cwd=path.parent)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("worst disagreements"))
    found = [LINE.match(ln) for ln in lines[start + 1:]]
    found = [m for m in found[:next((i for i, m in enumerate(found) if m is None), len(found))]]
    assert found, proc.stdout
    return found


def test_query_sample_numbers_agree_between_report_and_card(tmp_path):
    path = tmp_path / "p.duckdb"
    db = _labelled(path, "queries")
    places = cal.query_places(db, "s")
    items = store.read_sample_items(db, "s")
    total = len(items)
    assert total == 36 and len(places) == 36
    # by hand: the sample's queries in their labelling order, 12 pairs each, numbered within the query
    order = list(dict.fromkeys(items["query_id"].astype(str)))
    for position, query_id in zip(items["position"].astype(int), items["query_id"].astype(str)):
        place = places[position]
        assert (place.query_id, place.query, place.queries, place.pairs) == (query_id, order.index(query_id) + 1, 3, 12)
        assert place.pair == position - 12 * order.index(query_id) + 1
    db.close()
    for m in _report_lines(path):
        n, query_id, words = int(m.group(1)), m.group(2), m.group(6)
        place = places[n - 1]
        assert query_id == place.query_id and words == place.words()
        d = cal.open_for_labelling(path)
        try:
            item = cal.item(d, "s", n - 1)
        finally:
            d.close()
        card = pair_html(item, n - 1, total, [], place=place)
        assert f">Pair {n} of {total} · {words}</div>" in card


def test_pair_sample_has_no_query_place(tmp_path):
    path = tmp_path / "p.duckdb"
    db = _labelled(path, "pairs")
    assert cal.query_places(db, "s") is None
    total = store.count_items(db, "s")
    item = cal.item(db, "s", 0)
    db.close()
    assert all(m.group(6) is None for m in _report_lines(path))
    assert f">Pair 1 of {total}</div>" in pair_html(item, 0, total, [])
