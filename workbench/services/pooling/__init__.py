"""Judgment pools over stored runs (pools) and the plan of which pool pairs to judge within a budget
(budget).
"""
