"""Judgment pools over stored runs (pools)."""
