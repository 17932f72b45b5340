"""From judgments to qrels: the one admission rule (rule), exporting qrels and runs (export),
near-duplicate label propagation (propagation) and synthetic queries labelled grade 3.
"""
