"""The Retrieve & Pool page in Streamlit's AppTest: chunk, run BM25 and pool through its forms."""

from __future__ import annotations


from streamlit.testing.v1 import AppTest

from tests.ui.html_tables import html_tables
from workbench.store.chunks import read_chunks
from workbench.store.database import Database
from workbench.store.pools import read_pool, read_pool_pairs
from workbench.store.runs import read_run_rows


def _page():
    from workbench.ui.views import retrieve

    retrieve.render()


def _run() -> AppTest:
    at = AppTest.from_function(_page, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def _submit(at: AppTest, label: str) -> AppTest:
    button = next(b for b in at.button if b.label == label)
    button.click().run()
    assert not at.exception, at.exception
    return at


def test_page_shows_the_demo_pool_statistics(demo_db):
    at = _run()
    metrics = {m.label: m.value for m in at.metric}
    with Database(demo_db) as db:
        pairs = read_pool_pairs(db, "demo")
    assert metrics["Pairs"] == f"{len(pairs):,}"
    assert metrics["Queries"] == f"{pairs['query_id'].nunique():,}"
    assert len(at.get("vega_lite_chart")) == 3  # size, contributions, judged@k bar charts


def test_chunk_bm25_and_pool_through_the_page(demo_db):
    at = _run()
    at.text_input(key="chunk_name").input("fx")
    at.selectbox(key="chunk_strategy").select("fixed")
    at.number_input(key="chunk_size").set_value(400)
    _submit(at, "Create chunking")
    assert any("Chunking fx" in s.value for s in at.success)

    at.selectbox(key="bm25_chunking").select("fx")
    at.text_input(key="bm25_name").input("bm25fx")
    at.number_input(key="bm25_k").set_value(15)
    _submit(at, "Run BM25")
    assert any("bm25fx" in s.value for s in at.success), [e.value for e in at.error]

    at.text_input(key="pool_name").input("fxpool")
    at.multiselect(key="pool_runs").select("bm25fx")
    at.number_input(key="pool_depth").set_value(3)
    _submit(at, "Build pool")
    assert any("fxpool" in s.value for s in at.success), [e.value for e in at.error]

    with Database(demo_db) as db:
        chunks = read_chunks(db, "fx")
        run = read_run_rows(db, "bm25fx")
        pool = read_pool(db, "fxpool")
        pairs = read_pool_pairs(db, "fxpool")
    assert (chunks["end"] - chunks["start"]).max() == 400
    assert run.groupby("query_id").size().max() == 15
    assert pool["depth"] == 3 and pool["runs"] == ["bm25fx"]
    assert len(pairs) == run.query("rank <= 3").shape[0]


def test_errors_show_in_the_page(demo_db):
    at = _run()
    at.text_input(key="chunk_name").input("sections")  # the demo's chunking
    at.selectbox(key="chunk_strategy").select("section")
    _submit(at, "Create chunking")
    assert any("already exists" in e.value for e in at.error)
    at.text_input(key="pool_name").input("empty")
    _submit(at, "Build pool")
    assert any("Choose one or more “Runs”" in e.value for e in at.error)
    at.text_input(key="bm25_name").input("bm25")  # the demo's run
    _submit(at, "Run BM25")
    assert any("“Run name”" in e.value for e in at.error)
    # Nothing on the page speaks in flags.
    assert not any("--" in e.value for e in at.error), [e.value for e in at.error]


def test_names_and_pool_items_are_shown_literally(demo_db):
    at = _run()
    # The pool peek shows the item ids and text as escaped HTML, never as markdown.
    shown = " ".join(h.proto.body for h in at.get("html"))
    with Database(demo_db) as db:
        first = read_pool_pairs(db, "demo").sort_values(["query_id", "priority"]).iloc[0]
    assert f"{first['chunk_id']} · grade" in shown or f"{first['chunk_id']} · no label yet" in shown
    assert not any(first["chunk_id"] in c.value for c in at.caption)
    # A name with markdown characters comes back escaped, so `*` and `_` render as typed.
    at.selectbox(key="bm25_chunking").select("sections")
    at.text_input(key="bm25_name").input("b_m_25_")
    at.number_input(key="bm25_k").set_value(5)
    _submit(at, "Run BM25")
    assert any(r"b\_m\_25\_" in s.value for s in at.success), [e.value for e in at.error]
    # A name outside the naming rule is refused in the page's words.
    at.text_input(key="bm25_name").input("b*m")
    _submit(at, "Run BM25")
    assert any("“Run name”" in e.value and "--" not in e.value for e in at.error), [e.value for e in at.error]


def test_forms_clear_and_selectors_follow_what_was_built(demo_db):
    at = _run()
    assert at.text_input(key="chunk_name").value == ""
    assert at.text_input(key="chunk_name").placeholder.startswith("required")
    at.text_input(key="chunk_name").input("fixed-300")
    at.selectbox(key="chunk_strategy").select("fixed")
    at.number_input(key="chunk_size").set_value(300)
    _submit(at, "Create chunking")
    assert any("Chunking fixed-300" in s.value for s in at.success), [e.value for e in at.error]
    assert at.text_input(key="chunk_name").value == ""          # cleared
    assert at.selectbox(key="bm25_chunking").value == "fixed-300"  # follows the new chunking

    at.text_input(key="bm25_name").input("bm25-fixed")
    at.number_input(key="bm25_k").set_value(10)
    _submit(at, "Run BM25")
    assert any("bm25-fixed" in s.value for s in at.success), [e.value for e in at.error]
    assert at.text_input(key="bm25_name").value == ""
    assert at.multiselect(key="pool_runs").value == ["bm25-fixed"]

    at.text_input(key="pool_name").input("p2")
    at.number_input(key="pool_depth").set_value(2)
    _submit(at, "Build pool")
    assert any("Pool p2" in s.value for s in at.success), [e.value for e in at.error]
    assert at.selectbox(key="stats_pool").value == "p2"


def test_tables_show_no_none_nan_or_dict_text(demo_db):
    at = _run()
    for frame in (d.value for d in at.dataframe):
        text = frame.astype(str)
        assert not text.isin(["None", "nan", "NaN", "<NA>"]).any().any(), frame
        assert not text.apply(lambda col: col.str.contains(r"^\{|\{'", regex=True)).any().any(), frame
    tables = html_tables(at)
    runs = {r["run"]: r for r in tables["runs"]}
    assert "k1 = 1.5" in runs["bm25"]["parameters"] and "{" not in runs["bm25"]["parameters"]
    assert runs["bm25"]["documents"] == "41 of 41"
    assert {r["pool"]: r["runs"] for r in tables["pools"]} == {"demo": "bm25"}
    for rows in tables.values():
        for row in rows:
            assert not {"None", "nan", "<NA>"} & set(row.values()), row


def test_dense_tab_without_the_extra_says_how_to_install_it(demo_db, monkeypatch):
    import sys

    # As if sentence-transformers were not installed: find_spec returns None for it.
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    at = _run()
    assert any("pip install 'relevance-workbench[dense]'" in i.value for i in at.info)
    assert not any(b.label == "Run dense" for b in at.button)


def test_peek_shows_query_title_whole_chunk_and_grade(demo_db):
    from workbench.store.corpus import read_documents, read_queries

    at = _run()
    shown = " ".join(h.proto.body for h in at.get("html"))
    with Database(demo_db) as db:
        pairs = read_pool_pairs(db, "demo")
        query_id = sorted(pairs["query_id"].unique())[0]
        first = pairs.loc[pairs["query_id"] == query_id].sort_values("priority").iloc[0]
        chunk = read_chunks(db, "sections").set_index("chunk_id").loc[first["chunk_id"]]
        doc = read_documents(db, [first["doc_id"]]).iloc[0]
        query = read_queries(db).set_index("query_id").loc[query_id]
    import html as html_mod

    assert html_mod.escape(query["text"]) in shown
    assert html_mod.escape(doc["title"]) in shown
    whole = doc["text"][int(chunk["start"]):int(chunk["end"])]
    assert html_mod.escape(whole) in shown  # the whole chunk, not cut
    # q001's first pair is the labelled refresh-cycle section (grade 3 in the demo labels).
    assert f"{first['chunk_id']} · grade 3" in shown


def test_delete_lists_dependents_then_deletes_and_keeps_labels(demo_db):
    from workbench.store.meta import table_counts

    at = _run()
    with Database(demo_db) as db:
        before = table_counts(db)
    at.selectbox(key="delete_kind").select("run").run()
    at.selectbox(key="delete_name_run").select("bm25").run()
    at.button(key="delete_plan").click().run()
    plan = [w.value for w in at.warning if "Deleting the run bm25" in w.value]
    assert plan, [w.value for w in at.warning]
    # The pool built from the run is listed, with the rows that go; labels stay.
    assert "the pool demo" in plan[0] and f"{before['run_rows']:,} run rows" in plan[0]
    assert f"All {before['judgments']:,} labels stay" in plan[0]
    with Database(demo_db) as db:
        assert table_counts(db)["runs"] == 1  # listing deletes nothing
    at.button(key="delete_confirm").click().run()
    assert not at.exception, at.exception
    assert any("Deleted the run bm25 and 1 item that depended on it" in s.value for s in at.success), \
        [s.value for s in at.success]
    with Database(demo_db) as db:
        after = table_counts(db)
    assert after["runs"] == 0 and after["pools"] == 0 and after["run_rows"] == 0
    assert after["judgments"] == before["judgments"] and after["chunks"] == before["chunks"]


def test_export_a_run_downloads_the_trec_file(demo_db):
    at = _run()
    at.selectbox(key="export_run_name").select("bm25").run()
    at.button(key="export_run_prepare").click().run()
    assert not at.error, [e.value for e in at.error]
    name, data, rows, queries = at.session_state["_export_run_file"]
    lines = [line.split() for line in data.decode().splitlines()]
    with Database(demo_db) as db:
        run = read_run_rows(db, "bm25")
    assert name == "bm25.txt" and len(lines) == rows == len(run) and queries == 44
    got = {(q, i): (int(r), float(s)) for q, _, i, r, s, _ in lines}
    want = {(q, c): (int(r), float(s)) for q, c, r, s in run[["query_id", "chunk_id", "rank", "score"]].itertuples(index=False)}
    assert got == want


def test_pooling_a_run_that_misses_documents_says_so(demo_db, tmp_path):
    import json

    from workbench.services.ingest import import_file
    from workbench.services.project.lifecycle import open_project

    extra = tmp_path / "more.jsonl"
    extra.write_text("".join(json.dumps({"_id": f"n{i}", "text": f"## New\nnew text {i}"}) + "\n" for i in range(4)))
    with open_project(demo_db) as db:
        import_file(db, "corpus", extra)
    at = _run()
    # The stats of the existing pool warn, and so does the run table.
    assert any("covers 41 of 45 documents" in w.value for w in at.warning), [w.value for w in at.warning]
    at.text_input(key="pool_name").input("again")
    at.multiselect(key="pool_runs").select("bm25")
    at.number_input(key="pool_depth").set_value(2)
    _submit(at, "Build pool")
    message = next(s.value for s in at.success if "Pool again" in s.value)
    assert "41 of 45 documents" in message and "--" not in message


def test_pool_statistics_and_peek_state_the_qrels_policy_in_page_words(demo_db):
    """'Judged' on this page follows the one qrels rule: the page says which, without naming a
    command or a setting, also when LLM labels are left out for want of a passed gate."""
    import subprocess
    import sys

    from tests.support.prerequisites import REPO

    judged = subprocess.run([sys.executable, "-m", "workbench", "--db", str(demo_db), "judge", "--pool", "demo",
                             "--model", "offline-lexical"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert judged.returncode == 0, judged.stderr
    at = _run()
    captions = [c.value.replace("\\", "") for c in at.caption]  # markdown escapes (context.plain) off
    stats = [c for c in captions if c.startswith("Judged by the qrels policy")]
    peek = [c for c in captions if c.startswith("Grades by the qrels policy")]
    assert len(stats) == 1 and len(peek) == 1, captions
    assert "adjudicated > sme > imported > llm" in stats[0]
    assert "880 LLM labels left out" in stats[0] and "Calibration page" in stats[0]
    assert all("workbench " not in c and "llm_labels" not in c for c in stats + peek)
