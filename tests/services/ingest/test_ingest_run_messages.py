"""What a refused run import says: a name taken by a different run (another level, or other
results) says so and how to pick another name; an unknown chunk id of a chunking the project has
is reported as a chunk of that chunking, not as a document a corpus import would bring."""

from __future__ import annotations

import pytest

from tests.services.ingest.test_ingest import _chunk, db, project, write  # noqa: F401  (fixtures)
from workbench.errors import InputError
from workbench.services.ingest import import_file
from workbench.store.meta import table_counts


def _message(excinfo) -> str:
    return str(excinfo.value)


def test_a_document_run_under_the_name_of_a_chunk_run_says_the_name_is_taken(project, tmp_path):
    chunks = _chunk(project)
    lines = "".join(f"q1 Q0 {c} {i + 1} {9.0 - i} x\n" for i, c in enumerate(chunks["chunk_id"][:3]))
    import_file(project, "run", write(tmp_path, "bm25.run", lines))
    before = table_counts(project)
    with pytest.raises(InputError) as e:
        import_file(project, "run", write(tmp_path, "ok.run", "q1 Q0 d1 1 3.0 x\n"), name="bm25")
    message = _message(e)
    assert "the name 'bm25' is taken by a different run" in message
    assert "chunk level (chunking 'fixed8') with 3 rows" in message
    assert "document level with 1 row;" in message
    assert "--name NEW_NAME" in message and "score nan" not in message and "results differ" not in message
    assert table_counts(project) == before


def test_same_level_other_results_names_the_first_difference_without_nan(project, tmp_path):
    import_file(project, "run", write(tmp_path, "a/bm25.run", "q1 Q0 d1 1 3.0 x\nq1 Q0 d2 2 2.0 x\n"))
    with pytest.raises(InputError) as e:
        import_file(project, "run", write(tmp_path, "b/bm25.run", "q1 Q0 d3 1 3.0 x\n"))
    message = _message(e)
    assert "the name 'bm25' is taken by a different run" in message
    assert "3 of its (query, id) results differ" in message
    assert "is in the stored run but not in the file" in message or "is in the file but not in the stored run" \
        in message
    assert " nan " not in message


def test_an_unknown_chunk_id_of_a_known_chunking_is_called_a_chunk_id(project, tmp_path):
    _chunk(project)
    path = write(tmp_path, "badchunk.run", "q1 Q0 fixed8:d1:999 1 3.0 x\n")
    with pytest.raises(InputError) as e:
        import_file(project, "run", path)
    message = _message(e)
    assert "1 chunk ids of chunking 'fixed8' that are not in the project (first: 'fixed8:d1:999' (line 1))" \
        in message
    assert "doc id" not in message and "import a corpus" not in message
    # an id that names no known chunking is still an unknown document
    with pytest.raises(InputError, match="doc ids that are not in the project.*import a corpus"):
        import_file(project, "run", write(tmp_path, "other.run", "q1 Q0 nochunking:d1:0 1 3.0 x\n"))
