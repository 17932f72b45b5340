"""Few-shot judges: K SME-graded examples from a calibration sample's tuning part in the judge's
prompt, decided once for ``workbench judge --few-shot K`` and the Judge page's "Examples from the
tuning part of <sample>" (both call :func:`apply_few_shot`, so a job started on the page is the
job the CLI runs with the same options).

The rules, in the order they are checked (each refusal is a ``ConfigError`` naming its field,
``few_shot`` or ``few_shot_sample``: the CLI says ``--few-shot``, the page its label):

- ``k`` must be at least 1 (the page's 0 means "no examples" and never calls this);
- the offline baseline reads no prompt, so it cannot take examples;
- the examples are other people's SME labels: the caller must be allowed to read them
  (:mod:`workbench.services.visibility`, ``others_labels``; the local operator is a lead);
- the sample: the one named, else the newest sample with at least one SME label on its tuning
  part (:func:`few_shot_sources`); a named sample must exist and have such labels;
- ``k`` may not exceed the tuning part's labelled pairs.

The examples themselves are :func:`workbench.services.calibration.samples.few_shot_examples`
(stratified by grade, seeded by ``seed``, never from the held-out part) and enter the prompt
through :func:`workbench.services.judge.spec.with_few_shot` (their texts and grades are part of
the prompt hash, so the gate measures the few-shot configuration on its own labels).
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.errors import ConfigError
from workbench.services import visibility
from workbench.services.calibration.samples import few_shot_examples, list_samples, tuning_pairs
from workbench.services.judge.runner import DatabaseUse
from workbench.services.judge.spec import JudgeSpec, with_few_shot


@dataclass(frozen=True)
class FewShotSource:
    """A calibration sample examples can come from: its name and its tuning part's labelled pairs."""

    sample: str
    labelled: int


def few_shot_sources(db_path) -> list[FewShotSource]:
    """The calibration samples with at least one SME label on their tuning part, newest first
    (empty for a caller who may not read other people's labels). ``db_path``: a path or an open
    :class:`~workbench.store.database.Database`."""

    if not visibility.can_read("others_labels"):
        return []
    with DatabaseUse(db_path) as db:
        out = []
        for name in list_samples(db)["name"].astype(str):
            labelled = len(tuning_pairs(db, name))
            if labelled:
                out.append(FewShotSource(name, labelled))
    return out


def check_k(k: int) -> None:
    """Refuse a number of examples below 1 (``ConfigError`` on ``few_shot``)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"{{field:few_shot}} must be at least 1 example, got {k}", field="few_shot")


def apply_few_shot(db_path, spec: JudgeSpec, k: int, *, sample: str | None = None, seed: int = 0) -> JudgeSpec:
    """``spec`` with ``k`` examples from ``sample``'s tuning part (None: the newest sample with SME
    labels there), chosen with ``seed``; refuses by the rules of the module docstring."""

    check_k(k)
    if spec.offline or spec.template is None:
        with_few_shot(spec, [], sample="", seed=0)  # refuses in one line: the offline judge reads no prompt
    visibility.require_read("others_labels")
    with DatabaseUse(db_path) as db:
        sources = {s.sample: s for s in few_shot_sources(db)}
        if sample is None:
            if not sources:
                raise ConfigError("{field:few_shot} takes its examples from a calibration sample's tuning part, "
                                  "and no sample has SME labels there yet", field="few_shot",
                                  hint="draw one with {command} and label some of its tuning pairs first",
                                  command="calibrate sample --pool POOL")
            sample = next(iter(sources))  # newest first
        elif sample not in sources:
            raise ConfigError(_missing(db, sample), field="few_shot_sample")
        labelled = sources[sample].labelled
        if k > labelled:
            raise ConfigError(f"{{field:few_shot}} asks for {k} examples, but sample {sample!r} has {labelled} "
                              f"SME labels on its tuning part; ask for at most {labelled} or label more "
                              f"tuning pairs", field="few_shot")
        examples = few_shot_examples(db, sample, seed=int(seed), total=int(k))
    return with_few_shot(spec, examples, sample=sample, seed=int(seed))


def _missing(db, sample: str) -> str:
    """Why ``sample`` cannot give examples: it does not exist, or its tuning part has no SME label."""

    if sample in set(list_samples(db)["name"].astype(str)):
        return (f"sample {sample!r} has no SME labels on its tuning part yet (only those may become examples); "
                f"label some of its tuning pairs, or choose another {{field:few_shot_sample}}")
    return f"there is no calibration sample named {sample!r} for {{field:few_shot_sample}}"
