"""``workbench agree``: the agreement of two label files, outside any project."""

from __future__ import annotations

import math
from pathlib import Path

from workbench.core.calibration.agreement import agreement
from workbench.core.calibration.gate import GateThresholds, decide
from workbench.core.calibration.label_pairs import pair_files, parse_label_file
from workbench.errors import InputError
from workbench.services.calibration.agreement_report import result_dict


def _read_text(path: str | Path) -> str:
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file; check the path", path=str(p)) from None
    except IsADirectoryError:
        raise InputError("is a directory; pass a label file", path=str(p)) from None
    except OSError as exc:
        raise InputError(f"cannot be read: {exc.strerror}", path=str(p)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("is not UTF-8 text", path=str(p), line=data[: exc.start].count(b"\n") + 1) from None


def agree_files(reference: str | Path, candidate: str | Path, *, threshold: int = 2, seed: int = 0,
                scale_max: int = 3, clip: bool = False, n_boot: int = 2000,
                thresholds: GateThresholds = GateThresholds()) -> dict:
    """``workbench agree``: the agreement of ``candidate`` with ``reference`` (the human side).

    Its ``notes`` name the options they concern as placeholders (``{field:clip}``, see
    :mod:`workbench.errors`) for the front end to word (:func:`workbench.errors.render_text`)."""
    if scale_max not in (3, 4):
        raise InputError(f"scale 0-{scale_max} is not supported; use 0-3 or 0-4")
    ref = parse_label_file(_read_text(reference), str(reference), scale_max=scale_max, clip=clip)
    cand = parse_label_file(_read_text(candidate), str(candidate), scale_max=scale_max, clip=clip)
    paired = pair_files(ref, cand)
    if len(paired.reference) == 0:
        raise InputError(
            f"{reference} and {candidate} share no (query_id, item) pair ({len(ref.keys)} and "
            f"{len(cand.keys)} labels); check that both use the same ids (and both spans or neither)")
    levels = tuple(range(scale_max + 1))
    if threshold not in levels[1:]:
        raise InputError(f"{{field:threshold {threshold}}} must be a grade between 1 and {scale_max}")
    result = agreement(paired.reference, paired.candidate, levels=levels, threshold=threshold,
                       query_ids=paired.query_ids, seed=seed, n_boot=n_boot)
    verdict = decide(result, thresholds)
    out = result_dict(result, verdict)
    out["only_reference"] = paired.only_reference
    out["only_candidate"] = paired.only_candidate
    out["scale"] = f"0-{scale_max}"
    out["clipped"] = {"reference": ref.clipped, "candidate": cand.clipped}
    out["not_labels"] = {"reference": ref.not_labels, "candidate": cand.not_labels}
    out["reference"] = str(reference)
    out["candidate"] = str(candidate)
    if clip and (ref.clipped or cand.clipped):
        out["notes"].append(f"{{field:clip}} lowered {ref.clipped} reference and {cand.clipped} candidate grades "
                            f"above {scale_max} to {scale_max}")
    if math.isnan(out["kappa"]):
        out["notes"].append("κ is undefined: one side uses a single label")
    return out
