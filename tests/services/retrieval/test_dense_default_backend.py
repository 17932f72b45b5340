"""Where the onnx extra is installed, dense retrieval uses the ONNX fp32 encoder unless told
otherwise, says so in its summary, and its vectors are PyTorch's within the cosine bound of
tests/retrieval/test_onnx_dense.py (0.999 on every chunk)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.prerequisites import require_installed
from tests.support.retrieval_fixtures import shared_onnx_cache
from tests.support.templates import demo_project

require_installed("onnxruntime", "onnx", "sentence_transformers")  # found, not imported: collection stays cheap

from workbench.core.option_names import DEFAULT_DENSE_MODEL  # noqa: E402
from workbench.services.retrieval.runs import dense_cache_key, default_dense_backend  # noqa: E402
from workbench.store.database import Database  # noqa: E402
from workbench.store.embeddings import read_embeddings  # noqa: E402
from workbench.store.runs import read_run_info  # noqa: E402


def test_the_default_is_onnx_here_and_torch_for_a_loaded_model():
    assert default_dense_backend() == "onnx"
    assert default_dense_backend(encoder=object()) == "torch"  # a caller's SentenceTransformer


@pytest.mark.slow
def test_default_and_torch_retrieval_agree(cli, tmp_path, tmp_path_factory):
    db = tmp_path / "demo.duckdb"
    # This session's own export, shared with tests/retrieval/test_onnx_dense.py (one per run).
    env = {"WORKBENCH_ONNX_CACHE": str(shared_onnx_cache(tmp_path_factory, "fp32"))}
    demo_project(db)  # what `init --demo` builds: a copy of the worker's template
    default = cli("--db", str(db), "retrieve", "dense", "--chunking", "sections", "--name", "dense", env=env,
                  timeout=600)
    assert default.returncode == 0, default.stderr
    assert "backend onnx fp32" in default.stdout
    torch = cli("--db", str(db), "retrieve", "dense", "--chunking", "sections", "--name", "dense-torch",
                "--backend", "torch", env=env, timeout=600)
    assert torch.returncode == 0, torch.stderr
    assert "backend torch" in torch.stdout
    refused = cli("--db", str(db), "retrieve", "dense", "--chunking", "sections", "--name", "x", "--backend",
                  "torch", "--precision", "int8", env=env)
    assert refused.returncode == 3 and "applies to --backend onnx only" in refused.stderr

    with Database(db) as project:
        onnx_ids, onnx_vectors = read_embeddings(project, "sections", dense_cache_key(DEFAULT_DENSE_MODEL, "onnx"))
        torch_ids, torch_vectors = read_embeddings(project, "sections", dense_cache_key(DEFAULT_DENSE_MODEL, "torch"))
        info = read_run_info(project, ["dense", "dense-torch"]).set_index("name")
    assert onnx_ids == torch_ids and len(onnx_ids) == 279
    cosine = (onnx_vectors * torch_vectors).sum(axis=1)
    assert np.allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)
    assert cosine.min() >= 0.999, f"minimum cosine {cosine.min():.6f}"
    assert info.loc["dense", "params"]["backend"] == "onnx"
    assert info.loc["dense-torch", "params"]["backend"] == "torch"
