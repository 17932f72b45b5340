"""Act as one user for the length of a test's block: ``with acting_as(Actor("ann", "annotator")):``.

The services ask :func:`workbench.services.access.current_actor`, which calls the one actor source
installed in the process. The app installs its own when ``workbench.ui.auth`` is first imported
(module level), so the helper imports it first: otherwise a page run inside the block would
replace the test's source, and the source put back afterwards would be the one from before the
import (none), leaving every later test of the worker without the app's sign-in.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import workbench.ui.auth  # noqa: F401 - installs the app's actor source before the test replaces it
from workbench.services import access


@contextmanager
def acting_as(actor: access.Actor) -> Iterator[None]:
    previous = access.set_actor_source(lambda: actor)
    try:
        yield
    finally:
        access.set_actor_source(previous)
