"""SME calibration of the LLM judge, as one import: the names of the modules that hold it.

Shared by ``workbench agree`` / ``workbench calibrate`` and the app's Label and Calibration pages,
which import them from here. Each concept has its own module:

- :mod:`~workbench.services.calibration.samples`: drawing a sample from a judged pool; the
  tuning part's pairs and few-shot examples.
- :mod:`~workbench.services.calibration.labelling`: one SME's blind labelling, each action one
  transaction.
- :mod:`~workbench.services.calibration.label_page`: the Label page's reads per key press and
  its answers kept while the project is busy (:mod:`~workbench.services.calibration.pending`).
- :mod:`~workbench.services.calibration.adjudication`: agreement among SMEs, their
  disagreements and a lead's resolution.
- :mod:`~workbench.services.calibration.reference`: the reference labels and report options.
- :mod:`~workbench.services.calibration.agreement_report`: the report and the gate of a judge
  configuration; the verdicts themselves live in :mod:`~workbench.services.calibration.verdicts`,
  the one home of the gate.
- :mod:`~workbench.services.calibration.label_files`: ``workbench agree`` on two label files.

Reference labels when several SMEs labelled an item: the resolved label when a lead adjudicated
it, else the lower median of their grades (so one SME cannot pull a pair across the threshold
alone); their mutual agreement is reported.
"""

from __future__ import annotations

# Re-exported: the front ends and the tests import these names from here (services import the
# concept module).
from workbench.services.calibration.adjudication import adjudicate, sme_agreement, sme_disagreements  # noqa: F401
from workbench.services.calibration.agreement_report import (  # noqa: F401
    compare_judges,
    gate,
    judge_reason,
    report,
    report_json,
    result_dict,
)
from workbench.services.calibration.label_files import agree_files  # noqa: F401
from workbench.services.calibration.label_page import (  # noqa: F401
    drain_in_background,
    drain_kept,
    keep_answer,
    labelling_view,
    open_for_labelling,
    stored_answer,
)
from workbench.services.calibration.labelling import (  # noqa: F401
    ACTIONS,
    GRADES,
    annotator_id,
    cant_judge,
    item,
    judge_output,
    latest_sample,
    my_state,
    my_states,
    next_item,
    progress,
    progress_of,
    query_places,
    save_label,
    save_labels,
    skip,
    store_accepted,
    throughput,
    undo,
)
from workbench.services.calibration.reference import (  # noqa: F401
    ADJUDICATION,
    HIGH_RISK_RATE,
    ReportOptions,
    gated_part,
    reference_labels,
    slice_tags,
)
from workbench.services.calibration.samples import (  # noqa: F401
    create_sample,
    few_shot_examples,
    list_pools,
    list_samples,
    sample_info,
    tuning_pairs,
)

__all__ = [
    "ReportOptions",
    "adjudicate",
    "agree_files",
    "annotator_id",
    "cant_judge",
    "compare_judges",
    "create_sample",
    "few_shot_examples",
    "gate",
    "item",
    "judge_output",
    "labelling_view",
    "latest_sample",
    "list_pools",
    "list_samples",
    "my_state",
    "my_states",
    "next_item",
    "open_for_labelling",
    "progress",
    "progress_of",
    "report",
    "save_label",
    "save_labels",
    "skip",
    "sme_disagreements",
    "throughput",
    "tuning_pairs",
    "undo",
]
