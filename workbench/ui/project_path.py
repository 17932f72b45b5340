"""Which project the app serves: ``--db`` after ``streamlit run app.py --`` (``workbench app``
passes it), else ``WORKBENCH_DB``, else ``[project] db`` of the configuration."""

from __future__ import annotations

import argparse
import os
import sys

from workbench.config import load_settings


def served_project() -> str:
    """The project database's path as given (not resolved: a symbolic link stays one)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--db")
    known, _ = parser.parse_known_args(sys.argv[1:])
    return known.db or os.environ.get("WORKBENCH_DB") or str(load_settings().db_path)
