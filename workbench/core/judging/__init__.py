"""Judging without the network: the offline baseline grader, aggregating samples or several judges
into one judgment (self-consistency, ensembles), and budgeted judging (which pairs to judge first).
"""
