"""The chunking service: named chunkings over the whole corpus, stored in one transaction."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support.retrieval_fixtures import write_corpus
from workbench.errors import InputError, StoreError, WorkbenchError
from workbench.services.chunking import create_chunking
from workbench.store.chunks import read_chunkings, read_chunks
from workbench.store.database import Database
from workbench.store.judgments import read_judgments

DOCS = {"a": "0123456789abcdefghijKLMNO", "b": "short"}  # 25 and 5 characters


@pytest.fixture
def db(db_path):
    with Database(db_path) as db:
        write_corpus(db, DOCS, {"q1": "x"}, labels=[
            {"query_id": "q1", "doc_id": "a", "start": 3, "end": 12, "grade": 2},
            {"query_id": "q1", "doc_id": "b", "start": 0, "end": 5, "grade": 0},
        ])
        yield db


def test_fixed_chunking_stores_the_hand_computed_spans(db):
    summary = create_chunking(db, "fx", "fixed", size=10, overlap=0)
    chunks = read_chunks(db, "fx", with_text=True)
    # a: [0,10) [10,20) [20,25); b: [0,5)
    assert chunks[["chunk_id", "doc_id", "seq", "start", "end"]].values.tolist() == [
        ["fx:a:0", "a", 0, 0, 10], ["fx:a:1", "a", 1, 10, 20], ["fx:a:2", "a", 2, 20, 25],
        ["fx:b:0", "b", 0, 0, 5],
    ]
    assert chunks["text"].tolist() == ["0123456789", "abcdefghij", "KLMNO", "short"]
    assert (summary.documents, summary.chunks) == (2, 4)
    assert summary.chunks_per_doc == {"min": 1, "mean": 2.0, "max": 3}


def test_overlap_windows_step_by_size_minus_overlap(db):
    create_chunking(db, "ov", "fixed", size=10, overlap=4)
    spans = read_chunks(db, "ov").query("doc_id == 'a'")[["start", "end"]].values.tolist()
    # step 6: starts 0, 6, 12, 18; the window starting at 18 reaches the end (25).
    assert spans == [[0, 10], [6, 16], [12, 22], [18, 25]]


def test_params_are_recorded_with_strategy_defaults(db):
    create_chunking(db, "sec", "section")
    create_chunking(db, "whole", "document")
    info = read_chunkings(db).set_index("name")
    assert info.loc["sec", "strategy"] == "section"
    assert '"max_size": 2000' in info.loc["sec", "params"]
    assert info.loc["whole", "chunks"] == 2


def test_duplicate_name_is_refused_and_changes_nothing(db):
    create_chunking(db, "fx", "fixed", size=10)
    before = read_chunks(db, "fx")
    with pytest.raises(StoreError, match="already exists.*choose another --name"):
        create_chunking(db, "fx", "fixed", size=7)
    pd.testing.assert_frame_equal(read_chunks(db, "fx"), before)


def test_rechunking_leaves_every_label_untouched(db):
    labels_before = read_judgments(db)
    create_chunking(db, "fx", "fixed", size=10)
    create_chunking(db, "fx2", "fixed", size=4, overlap=1)
    create_chunking(db, "sent", "sentences", size=2)
    pd.testing.assert_frame_equal(read_judgments(db), labels_before)
    assert len(read_judgments(db)) == 2


@pytest.mark.parametrize("kwargs,error,match", [
    ({"strategy": "document", "size": 10}, InputError, "takes no --size"),
    ({"strategy": "paragraphs"}, InputError, "unknown chunking strategy"),
    ({"strategy": "fixed", "size": 10, "overlap": 10}, WorkbenchError, "overlap"),
])
def test_invalid_specs_say_what_to_fix(db, kwargs, error, match):
    with pytest.raises(error, match=match):
        create_chunking(db, "bad", **kwargs)
    assert read_chunkings(db).empty


def test_name_with_colon_is_refused(db):
    with pytest.raises(WorkbenchError, match="letters, digits"):
        create_chunking(db, "a:b", "document")


def test_empty_corpus_is_an_error(db_path, tmp_path):
    with Database(tmp_path / "empty.duckdb") as empty:
        with pytest.raises(InputError, match="no documents"):
            create_chunking(empty, "fx", "fixed", size=10)
