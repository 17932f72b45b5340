"""How a lean command (``eval``) sets up and ends its process.

``eval`` runs in loops (a CI script scoring each run file), where start-up and teardown CPU add
up, and it does no linear algebra and opens nothing that needs an orderly exit when it reads
files. :func:`workbench.cli.main` pauses the cyclic garbage collector while such a command runs
and calls :func:`set_up` before its handler (and :func:`restore_huge_pages` after it, when
``set_up`` turned them off); :func:`workbench.cli.run` ends the process with
``os._exit`` when :func:`nothing_left_to_tear_down`. docs/performance.md has the measurements.
"""

from __future__ import annotations

import argparse
import os
import sys

from workbench import lazylibs

#: the commands run lean (see the module docstring)
LEAN_COMMANDS = {"eval"}
#: what :func:`lean_numpy` sets while numpy is imported (each only where the user has not)
_LEAN_NUMPY_ENV = {"OPENBLAS_NUM_THREADS": "1", "NUMPY_MADVISE_HUGEPAGE": "0"}
#: input files at least this large (together) keep numpy's huge pages: their arrays are big
#: and live long enough for the page-table savings to outweigh the compaction
_HUGE_PAGES_FROM_BYTES = 1 << 30


def input_bytes(args: argparse.Namespace) -> int:
    """The total size of the files a command reads (``qrels`` and ``runs`` arguments; a path
    that cannot be read counts 0: its reader reports it)."""
    paths = [getattr(args, "qrels", None), *(getattr(args, "runs", None) or ())]
    total = 0
    for path in paths:
        try:
            total += os.stat(path).st_size if path else 0
        except (OSError, TypeError, ValueError):
            pass
    return total


def lean_numpy(*, huge_pages: bool = False) -> None:
    """Import numpy with OpenBLAS limited to one thread and (unless ``huge_pages``) without
    transparent huge pages for its arrays, unless numpy is already imported; a variable the
    user set is kept as set.

    * OpenBLAS starts its thread pool (one thread per core) when numpy is imported, and the
      start costs CPU in every process whether or not a matrix product follows; ``eval`` never
      does one, and runs in loops (a CI script scoring each run file).
    * numpy asks the kernel for huge pages (``madvise``) for every large array. Where
      the kernel then compacts memory to find one (``defrag`` set to ``madvise``, a common
      default) and memory is fragmented, as right after another large process exited, each
      first touch of such an array can wait for that compaction: the system CPU of a
      10^6-row ``eval`` doubled (docs/performance.md). With inputs of a GB or more
      (:data:`_HUGE_PAGES_FROM_BYTES`, 10^8 rows) huge pages paid off in the same measurements,
      so the caller keeps them there.

    The variables are read once, by that import, and removed right after, so processes this
    one starts keep their defaults."""
    if "numpy" in sys.modules:
        return
    wanted = {k: v for k, v in _LEAN_NUMPY_ENV.items() if not (huge_pages and k == "NUMPY_MADVISE_HUGEPAGE")}
    added = [name for name in wanted if name not in os.environ]
    os.environ.update({name: wanted[name] for name in added})
    try:
        lazylibs.numpy  # noqa: B018 - the import is the point
    finally:
        for name in added:
            os.environ.pop(name, None)


#: glibc's mallopt parameters, and the values :func:`reuse_freed_memory` gives them
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_TRIM_BYTES, _MMAP_BYTES = 128 << 20, 64 << 20


def reuse_freed_memory() -> bool:
    """With glibc, serve allocations up to ``_MMAP_BYTES`` from the heap and give freed heap
    memory back to the system only when more than ``_TRIM_BYTES`` of it lies at the top; False
    where there is no ``mallopt`` (another C library), which changes nothing else.

    ``eval`` makes and frees large arrays per million run rows, one after the other. By default
    glibc maps each allocation above its mmap threshold (which slides up to a cap) afresh and
    trims freed memory beyond twice that threshold, so the kernel zero-fills the same amount of
    memory again for the next array (page faults). Kept in the heap, it is reused: the peak
    memory stays that of the live arrays, and the CPU falls (docs/performance.md)."""
    try:
        mallopt = lazylibs.ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_BYTES))


#: Linux's prctl options that read and set a process's "no transparent huge pages" flag
_PR_SET_THP_DISABLE, _PR_GET_THP_DISABLE = 41, 42
#: variables by which a user asks a library for huge pages: set, they keep the process's flag
_HUGE_PAGE_ENV = ("NUMPY_MADVISE_HUGEPAGE", "MIMALLOC_ALLOW_THP")


def _prctl():
    try:
        return lazylibs.ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None  # not Linux


def no_transparent_huge_pages() -> bool:
    """Turn transparent huge pages off for this process (Linux ``PR_SET_THP_DISABLE``); True
    when this call turned them off (:func:`restore_huge_pages` turns them on again), False where
    they were off already, a variable of :data:`_HUGE_PAGE_ENV` is set (the user chose), or the
    system has no such switch.

    numpy is kept from asking for huge pages by :func:`lean_numpy`, but pyarrow's allocator
    (mimalloc) reserves its arena with ``madvise(MADV_HUGEPAGE)`` too. With the kernel's
    ``defrag`` at ``madvise`` (a common default), a first touch of such memory waits for the
    kernel to compact memory, which right after another large process exited costs a short
    ``eval`` more system CPU than the huge pages save (docs/performance.md). The flag holds for
    the whole process, whoever asks, and for processes it starts (``eval`` on files starts none)."""
    if any(name in os.environ for name in _HUGE_PAGE_ENV):
        return False
    prctl = _prctl()
    if prctl is None or prctl(_PR_GET_THP_DISABLE, 0, 0, 0, 0) != 0:
        return False
    return prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0


def restore_huge_pages() -> None:
    """Undo :func:`no_transparent_huge_pages` (for callers of ``main()`` in their own process)."""
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_THP_DISABLE, 0, 0, 0, 0)


def set_up(args: argparse.Namespace) -> bool:
    """numpy imported lean, freed memory kept for reuse, and, for inputs under
    :data:`_HUGE_PAGES_FROM_BYTES`, no transparent huge pages; True when huge pages were turned
    off here (:func:`restore_huge_pages` undoes it)."""
    huge_pages = input_bytes(args) >= _HUGE_PAGES_FROM_BYTES
    lean_numpy(huge_pages=huge_pages)
    reuse_freed_memory()
    return False if huge_pages else no_transparent_huge_pages()


def nothing_left_to_tear_down() -> bool:
    """Whether a lean command's process may end without the interpreter's teardown, after
    flushing its output: it opened no project (duckdb not imported: ``eval`` on files) and
    started no thread, and stdout and stderr are flushed. The teardown would free every object
    and array one by one and run exit handlers; for such a command none of that is seen outside
    the process (its files are closed, its temporary run parts removed by ``evaluate``), and it
    costs a few percent of a short ``eval``'s CPU. False (the normal exit) when a flush fails:
    the interpreter then reports a closed pipe as usual."""
    threading = sys.modules.get("threading")  # not imported: no thread was started from Python
    if "duckdb" in sys.modules or (threading is not None and threading.active_count() > 1):
        return False
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return False
    return True
