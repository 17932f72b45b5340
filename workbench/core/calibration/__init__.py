"""Calibrating the LLM judge against SMEs: the calibration sample, paired label files, agreement
(TPR, TNR, Cohen's kappa and their intervals), the trust gate, and rank correlation between the
system orderings two sets of qrels give.
"""
