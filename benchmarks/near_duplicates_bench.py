"""Near-duplicate detection on TREC DL 2019 passages: MinHash LSH (datasketch, what
``workbench labels propagate`` uses) against an exact all-pairs search through an inverted index
of shingles (every pair sharing a shingle is compared exactly), measured in the same run.

Prints, per Jaccard threshold: the exact pairs, the pairs LSH found (all verified, so never a
false positive), its recall, and both times.

    .venv/bin/python benchmarks/near_duplicates_bench.py [--thresholds 0.9,0.8,0.7] [--num-perm 128]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from workbench.core.documents import near_duplicates as nd

DATA = REPO.parent / "shared" / "datasets" / "trec-dl-2019-passage" / "dl2019_document.jsonl"


def exact_pairs(ids, texts, threshold, width):
    """All pairs with Jaccard >= threshold: candidates share at least one shingle."""
    sets = [nd.shingles(t, width) for t in texts]
    postings = defaultdict(list)
    for i, s in enumerate(sets):
        for g in s:
            postings[g].append(i)
    seen = set()
    out = {}
    for members in postings.values():
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                i, j = members[x], members[y]
                if (i, j) in seen:
                    continue
                seen.add((i, j))
                sim = nd.jaccard(sets[i], sets[j])
                if sim >= threshold:
                    out[tuple(sorted((ids[i], ids[j])))] = sim
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--thresholds", default="0.9,0.8,0.7")
    p.add_argument("--num-perm", type=int, default=128)
    p.add_argument("--shingle", type=int, default=5)
    args = p.parse_args(argv)
    docs = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines()]
    ids, texts = [d["docid"] for d in docs], [d["doc"] for d in docs]
    print(f"{len(ids):,} passages, {args.shingle}-word shingles, {args.num_perm} permutations")
    print("| threshold | exact pairs | LSH pairs | recall | exact s | LSH s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for t in (float(x) for x in args.thresholds.split(",")):
        started = time.perf_counter()
        ref = exact_pairs(ids, texts, t, args.shingle)
        exact_s = time.perf_counter() - started
        started = time.perf_counter()
        got = nd.near_duplicate_pairs(ids, texts, threshold=t, width=args.shingle, num_perm=args.num_perm)
        lsh_s = time.perf_counter() - started
        found = set(zip(got["item_a"], got["item_b"]))
        assert found <= set(ref), "a verified LSH pair is not an exact pair"
        recall = len(found) / len(ref) if ref else float("nan")
        print(f"| {t:g} | {len(ref):,} | {len(found):,} | {recall:.3f} | {exact_s:.1f} | {lsh_s:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
