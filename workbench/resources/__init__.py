"""Data that ships inside the package: judge prompt templates and the demo project.

The repository's top-level ``prompts/`` and ``data/demo/`` are symlinks to these folders, so
the layout reads as DEVELOPERS.md describes it while a wheel install still carries the files.
"""

from __future__ import annotations

from pathlib import Path

RESOURCES = Path(__file__).resolve().parent
PROMPTS_DIR = RESOURCES / "prompts"
DEMO_DIR = RESOURCES / "demo"
