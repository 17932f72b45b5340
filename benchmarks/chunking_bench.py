"""Throughput of every chunking strategy on synthetic ~2 KB markdown-ish documents.

Run: python benchmarks/chunking_bench.py [n_docs]. Prints docs/s per strategy; no assertions.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pandas as pd

from workbench.core.documents.chunking import ChunkingSpec, chunk_documents

WORDS = np.array(
    "the a retrieval query chunk document span judge pool rank score grade relevant model "
    "index vector sparse dense fusion metric recall precision".split()
)


def synthetic_docs(n: int, seed: int = 0, approx_chars: int = 2000) -> pd.DataFrame:
    """``n`` documents of ~``approx_chars`` characters: a heading, paragraphs, sentences."""
    rng = np.random.default_rng(seed)
    # Build a pool of 512 distinct texts and cycle them: text generation is not what we time.
    texts = []
    for _ in range(512):
        parts = ["# " + " ".join(rng.choice(WORDS, 4)) + "\n\n"]
        size = len(parts[0])
        while size < approx_chars:
            sentence = " ".join(rng.choice(WORDS, rng.integers(5, 15))).capitalize() + ". "
            if rng.random() < 0.15:
                sentence += "\n\n"
            parts.append(sentence)
            size += len(sentence)
        texts.append("".join(parts))
    return pd.DataFrame({"doc_id": [f"d{i}" for i in range(n)], "text": [texts[i % 512] for i in range(n)]})


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    docs = synthetic_docs(n)
    specs = [
        ChunkingSpec("doc", "document"),
        ChunkingSpec("fx512", "fixed", {"size": 512, "overlap": 64}),
        ChunkingSpec("tok128", "fixed", {"size": 128, "overlap": 16, "unit": "tokens"}),
        ChunkingSpec("sec800", "section", {"max_size": 800}),
        ChunkingSpec("sent5", "sentences", {"size": 5, "overlap": 1}),
    ]
    print(f"{n} documents, mean {docs['text'].str.len().mean():.0f} chars")
    for spec in specs:
        t0 = time.perf_counter()
        chunks = chunk_documents(spec, docs)
        dt = time.perf_counter() - t0
        print(f"{spec.name:8s} {spec.strategy:10s} {len(chunks):9d} chunks  {dt:7.2f} s  {n / dt:12,.0f} docs/s")


if __name__ == "__main__":
    main()
