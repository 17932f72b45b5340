"""SMEs calibrate the judge: the sample (samples), blind labelling (labelling, label_page,
pending), agreement among SMEs and adjudication (adjudication), the reference labels (reference),
the report and the gate (agreement_report, verdicts: the one home of the gate) and two label
files compared (label_files); workflow re-exports them for the front ends.
"""
