"""Readers of relevance judgments (qrels) and run files into :class:`Qrels` and :class:`Run`.

Formats
    TREC qrels   ``query_id iteration doc_id grade`` (whitespace separated; iteration ignored).
    TREC run     ``query_id Q0 doc_id rank score tag [junk ...]``; the second column may be
                 anything (``Q0``, ``0``), rank is ignored, extra columns after the tag are
                 tolerated (as trec_eval does for ``results.trunc``).
    BEIR qrels   ``query-id<TAB>corpus-id<TAB>score``, with or without that header line.
    JSONL        one object a line: ``{"query_id", "query", "relevant": {doc_id: grade}, "tags"}``.

In the TREC formats lines starting with ``#`` are comments (trec_eval 10) and blank lines are
skipped; ids may contain ``#``. A UTF-8 byte-order mark at the start of a file is dropped (it is
not part of the first id). Grades are integers that fit in 64 bits; a grade below 0 means "in the
pool but not judged" and is kept as given (the engine treats it as neither relevant nor judged).
Scores are finite numbers: ``nan``, ``inf``, ``-inf`` and overflowing values such as ``1e400``
are refused with the file and line.

Only regular files are read: a directory, a device (``/dev/zero``) or a FIFO is refused at once
(reading one could take forever). Values quoted in error messages are cut to about 80
characters (:func:`workbench.errors.clip`).

The TREC readers first try a fast path: pyarrow's CSV reader on blocks of whole lines, each
block's columns copied straight into the output arrays (:func:`_block_columns`), then on the
whole file's whitespace-normalised bytes.
When that fails for any reason, a careful line-by-line parser re-reads the file and raises
:class:`~workbench.errors.InputError` naming the file, the line and what was expected; it also
handles the legal inputs the fast path cannot (ragged junk columns).

A run file larger than ``block_rows`` is read by :func:`read_trec_run_parts` as parts of whole
queries (ranges of consecutive queries when its rows are grouped by query, else split by a hash
of the query id; through temporary Arrow files), so that scoring it needs the memory of one
part; parsing and error messages are those of :func:`read_trec_run`.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
from collections.abc import Generator, Iterator
from itertools import chain
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from workbench import lazylibs
from workbench.core.formats.lines import load_json_line
from workbench.core.metrics.arrow_buffers import from_numpy, take, to_numpy
from workbench.core.metrics.id_hash import grouped_id_hash, id_hash, run_heads
from workbench.core.metrics.qrels_and_runs import Qrels, Run
from workbench.errors import InputError, clip

RUN_FIELDS = "query_id Q0 doc_id rank score run_tag"
QRELS_FIELDS = "query_id iteration doc_id grade"


def _column(table: pa.Table, name: str, dtype) -> np.ndarray | None:
    """A numeric column as numpy; None when it holds a null (a value pyarrow could not read)."""
    col = table.column(name)
    if col.null_count:
        return None
    return to_numpy(col, dtype)


# --- TREC formats -------------------------------------------------------------------------
_COMMENT = re.compile(rb"(?m)^[ \t]*#[^\n]*(?:\n|$)")
_BLANKS = re.compile(rb"[ \t\r\f\v]+")
_EDGES = re.compile(rb"(?m)^ | $")


class _SlowPath(Exception):
    """The fast reader cannot handle this file; use the careful one."""


_DOUBLED = re.compile(rb" {2,}")
#: tab, CR, form feed and vertical tab as spaces (:func:`_normalise`)
_BLANKS_AS_SPACES = bytes.maketrans(b"\t\r\f\v", b"    ")


def _normalise(data: bytes) -> bytes:
    """Collapse every run of blanks into one space and drop comment lines and edge blanks.

    The same text as substituting ``_BLANKS`` and then ``_EDGES`` everywhere, made by C loops
    over the whole text (a CR LF as LF, the other blanks as spaces), with a substitution only
    where doubled or edge spaces remain: substituting each of a file's millions of single tabs
    through the regular expression engine took seconds."""
    if b"#" in data and (data.startswith(b"#") or b"\n#" in data or re.search(rb"\n[ \t]+#", data)):
        data = _COMMENT.sub(b"", data)
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")  # "x\r\n": "x \n" by the substitution, then "x\n"
    data = data.translate(_BLANKS_AS_SPACES)
    if b"  " in data:
        data = _DOUBLED.sub(b" ", data)
    if data.startswith(b" ") or data.endswith(b" ") or b"\n " in data or b" \n" in data:
        data = _EDGES.sub(b"", data)
    return data


def _csv_options(types: dict[int, pa.DataType], block_size: int | None = None, sep: bytes = b" ") -> dict:
    """pyarrow's CSV options for TREC fields separated by one ``sep`` (a space or a tab): the
    fields of ``types`` (position -> type), unquoted, none null, text taken ``block_size`` bytes
    at a time (else pyarrow's default)."""
    return dict(
        # one thread: as fast here (parsing is cheap next to conversion) and far less peak memory
        read_options=pacsv.ReadOptions(autogenerate_column_names=True, use_threads=False,
                                       **({} if block_size is None else {"block_size": block_size})),
        parse_options=pacsv.ParseOptions(delimiter=sep.decode(), quote_char=False, double_quote=False),
        convert_options=pacsv.ConvertOptions(
            column_types={f"f{i}": t for i, t in types.items()},
            include_columns=[f"f{i}" for i in types],
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
        memory_pool=pa.system_memory_pool(),  # freed parse buffers stay reusable by numpy
    )


def _read_table(data: bytes, types: dict[int, pa.DataType]) -> pa.Table:
    return pacsv.read_csv(pa.BufferReader(pa.py_buffer(data)), **_csv_options(types))  # no copy of data


_BOM = b"\xef\xbb\xbf"


def _plain_text(path: Path) -> tuple[bool, bytes] | None:
    """``(all ASCII, separator)`` when pyarrow can stream the file as it is (fields separated
    by single spaces, or by single tabs in a file without spaces; lines ending in LF or CR LF;
    no empty field); None when the careful reader must read it: a byte-order mark, a ``#``, a
    vertical tab or form feed, tabs and spaces, a CR alone, an empty field, or a file that
    cannot be read."""
    # one buffer read into again and again: a new bytes object per read cost more in page
    # faults than the reads and the byte searches together. Its first byte holds the last one
    # of the read before (at first a line end), so pairs across reads are checked.
    buf = bytearray(1 + (1 << 18))
    buf[0] = 0x0A
    view = memoryview(buf)
    as_bytes = np.frombuffer(buf, dtype=np.uint8)
    scratch = np.empty(len(buf), dtype=np.uint8)
    ascii_only, tab, space = True, False, False
    try:
        with path.open("rb", buffering=0) as f:
            first = True
            while n := f.readinto(view[1:]):
                if first and buf.startswith(_BOM, 1):
                    return None
                first = False
                m = n + 1
                sep = _separator(buf, as_bytes, m, scratch, line_start=False, line_end=False)
                if sep is None:
                    return None
                # one separator for the whole file: pyarrow's stream reads it with one
                tab = tab or sep == b"\t"
                space = space or buf.find(b" ", 0, m) >= 0
                if tab and space:
                    return None
                if ascii_only:
                    ascii_only = bool(as_bytes[1:m].max() < 0x80)
                buf[0] = buf[n]
    except OSError:
        return None  # the byte reader reports it properly
    if not _no_empty_field(as_bytes[:1], line_start=False):  # the last byte, at the end of the last line
        return None
    return ascii_only, b"\t" if tab else b" "


_LINE_ENDS = (0x0A, 0x0D)


def _other_blank(buf: bytes | bytearray, start: int, end: int) -> bool:
    """Whether ``buf[start:end]`` holds a vertical tab or form feed."""
    return buf.find(b"\x0b", start, end) >= 0 or buf.find(b"\x0c", start, end) >= 0


def _crlf_count(a: np.ndarray) -> int | None:
    """How many CRs ``a[:-1]`` (uint8) holds, each followed by LF; None when one is not: the
    careful reader reads such a CR as a blank, pyarrow as a line end. A CR last in ``a`` is not
    looked at: a block ends with LF, and in a file scanned read by read the next read holds
    what follows it."""
    cr = a[:-1] == 0x0D
    n = int(np.count_nonzero(cr))
    followed = np.logical_and(cr, a[1:] == 0x0A, out=cr)
    return n if int(np.count_nonzero(followed)) == n else None


def _no_empty_field(a: np.ndarray, scratch: np.ndarray | None = None, *, line_start: bool = True,
                    line_end: bool = True, crlf: int = 0) -> bool:
    """Whether no field of the lines in ``a`` (uint8) is empty: no two bytes up to 0x20 (blanks,
    line ends, other control bytes) stand side by side, except line ends (empty lines, CR LF),
    and ``a`` neither starts with a blank when it starts a line (``line_start``) nor ends with
    one when its end ends a line (``line_end``: the text's end, with or without a last LF).

    pyarrow splits at every separator, so ``"q1  Q0"`` holds an empty field where the careful
    reader, which splits at runs of blanks, sees none; and it holds every row of a block to the
    first row's field count, so a file whose every line has a doubled blank (aligned columns)
    parses without an error, each field after it one column to the right (the doc ids "Q0",
    the scores the ranks).

    Two neighbours are both up to 0x20 exactly where the larger of them is: one elementwise
    maximum and one minimum over ``_BLOCK_BYTES`` at a time; only where that finds some (CR LF
    line ends, empty lines) are the pairs looked at. ``crlf``: how many CR LF pairs ``a`` holds
    (:func:`_crlf_count`; each such pair is one of those found): when they are all that is found
    in an ``a`` checked in one step, no pair is looked at one by one. ``scratch``: a uint8 array
    of at least ``min(len(a), _BLOCK_BYTES)`` items, for a caller checking block after block."""
    n = len(a)
    if n == 0:
        return True
    if line_start and a[0] <= 0x20 and a[0] not in _LINE_ENDS:
        return False
    if line_end and a[-1] <= 0x20 and a[-1] not in _LINE_ENDS:
        return False
    step = _BLOCK_BYTES
    if scratch is None:
        scratch = np.empty(min(n, step), dtype=np.uint8)
    for i in range(0, n - 1, step):
        part = a[i:i + step + 1]  # one byte into the next part: every neighbouring pair once
        larger = scratch[:len(part) - 1]
        np.maximum(part[1:], part[:-1], out=larger)
        if larger.min() > 0x20:
            continue
        if crlf and len(part) == n and np.count_nonzero(larger <= 0x20) == crlf:
            continue  # the CR LF pairs, and nothing else
        at = np.flatnonzero(larger <= 0x20)
        x, y = part[at], part[at + 1]
        if not (((x == 0x0A) | (x == 0x0D)) & ((y == 0x0A) | (y == 0x0D))).all():
            return False
    return True


def _as_read(types: dict[int, pa.DataType], ascii_only: bool) -> dict[int, pa.DataType]:
    """The types to parse columns as: string columns of an all-ASCII file as binary, which
    pyarrow then does not check for UTF-8 (every ASCII text is; :func:`_as_strings` labels
    them strings again, without a copy)."""
    if not ascii_only:
        return types
    return {i: pa.binary() if t == pa.string() else t for i, t in types.items()}


def _as_strings(column: pa.Array) -> pa.Array:
    """A binary column read from ASCII text as the string column it is (no copy); other
    columns as they are."""
    return column.view(pa.string()) if column.type == pa.binary() else column


def _separator(buf: bytearray, as_bytes: np.ndarray, n: int, scratch: np.ndarray, *,
               line_start: bool = True, line_end: bool = True) -> bytes | None:
    """How pyarrow can parse the whole lines ``buf[:n]`` (``as_bytes``: the same memory) as
    they are: fields separated by single spaces (``b" "``) or single tabs (``b"\t"``), lines
    ending in LF or CR LF. None, for the careful reader, on a ``#`` (a comment), a vertical tab
    or form feed (blanks to the careful reader, not to pyarrow), both tabs and spaces, a CR not
    followed by LF (:func:`_crlf_count`), or an empty field (:func:`_no_empty_field`, with
    ``line_start`` and ``line_end`` for text cut elsewhere than between lines)."""
    if buf.find(b"#", 0, n) >= 0 or _other_blank(buf, 0, n):
        return None
    sep = b" "
    if buf.find(b"\t", 0, n) >= 0:
        if buf.find(b" ", 0, n) >= 0:
            return None
        sep = b"\t"
    crlf = _crlf_count(as_bytes[:n]) if buf.find(b"\r", 0, n) >= 0 else 0
    if crlf is None:
        return None
    return sep if _no_empty_field(as_bytes[:n], scratch, line_start=line_start, line_end=line_end, crlf=crlf) else None


#: text parsed at a time by :func:`_block_columns` (whole lines), read into one buffer again
#: and again
_BLOCK_BYTES = 1 << 20
_NUMPY_TYPES = {pa.float64(): np.float64, pa.int64(): np.int64}


def _block_columns(path: Path, types: dict[int, pa.DataType], min_fields: int, first_ok,
                   block_bytes: int = _BLOCK_BYTES) -> dict[int, pa.Array | np.ndarray] | None:
    """The cheapest path: the file read ``block_bytes`` of whole lines at a time into one
    buffer, each block parsed by pyarrow and its columns copied at once into the output
    arrays; ``types`` maps field positions to ``pa.string()`` (a string array out) or
    ``pa.float64()``/``pa.int64()`` (a numpy array out). Fields are separated by single spaces
    or, in a block without spaces, single tabs; lines end in LF or CR LF. None, for the careful
    reader to decide, on anything it does not read as it is: a byte-order mark, anything
    :func:`_separator` refuses (a ``#``, tabs and spaces in one block, a CR alone, an empty
    field: doubled or edge blanks), a line longer than the block, rows of unequal length, a
    number pyarrow cannot read, no row, a first line whose field count fails ``first_ok``, a
    file of 2 GiB or more, or an error reading it.

    The output arrays are sized for the most rows the file can hold (``min_fields`` fields of
    one byte each a line) and only the part written is ever touched, so the memory used is that
    of the columns: no whole-file text, no per-block chunks joined by a second copy. A block
    whose bytes are all ASCII has its ids parsed as binary (pyarrow skips the UTF-8 check,
    which every ASCII text passes); any other block is checked."""
    try:
        size = path.stat().st_size
        f = path.open("rb", buffering=0)
    except OSError:
        return None  # the byte reader reports it properly
    if size == 0 or size >= 1 << 31:  # int32 offsets
        f.close()
        return None
    max_rows = size // (2 * min_fields - 1) + 1  # the last line may lack its newline
    try:  # address space only: where the system refuses to promise it, the other readers decide
        offsets = {i: np.empty(max_rows + 1, dtype=np.int32) for i, t in types.items() if t == pa.string()}
        data = {i: np.empty(size, dtype=np.uint8) for i in offsets}
        numbers = {i: np.empty(max_rows, dtype=_NUMPY_TYPES[t]) for i, t in types.items() if t != pa.string()}
    except MemoryError:
        f.close()
        return None
    used = dict.fromkeys(offsets, 0)
    for i in offsets:
        offsets[i][0] = 0
    options: dict[tuple[bool, bytes], dict] = {}  # by (all ASCII, separator), made when first needed
    buf = bytearray(block_bytes)
    view = memoryview(buf)
    as_bytes = np.frombuffer(buf, dtype=np.uint8)
    scratch = np.empty(block_bytes, dtype=np.uint8)
    n = kept = 0
    with f:
        while True:
            try:
                got = f.readinto(view[kept:])
            except OSError:
                return None
            end = kept + got
            if got:
                cut = buf.rfind(b"\n", 0, end) + 1
                if cut == 0:
                    if end == len(buf):
                        return None  # a line longer than the block
                    kept = end
                    continue
            else:  # the file's end, after a last line without its newline
                if end == 0:
                    break
                buf[end] = 0x0A  # pyarrow finds no row in a block without one; kept < the block
                cut = end + 1
            if n == 0 and (buf.startswith(_BOM) or not first_ok(_ncols_first_line(bytes(view[:min(cut, 1 << 16)])))):
                return None
            sep = _separator(buf, as_bytes, cut, scratch)
            if sep is None:
                return None
            key = (bool(as_bytes[:cut].max() < 0x80), sep)
            if key not in options:  # pyarrow's block twice ours: a block of ours is one chunk
                options[key] = _csv_options(_as_read(types, key[0]), 2 * block_bytes, sep)
            try:
                table = pacsv.read_csv(pa.BufferReader(pa.py_buffer(view[:cut])), **options[key])
            except (pa.ArrowInvalid, pa.ArrowKeyError, pa.ArrowTypeError):
                return None
            m = table.num_rows
            if table.num_columns != len(types) or n + m > max_rows:
                return None
            for j, i in enumerate(types):
                column = table.column(j)
                if column.null_count:
                    return None  # a number pyarrow could not read
                row = n
                for chunk in column.chunks:
                    k = len(chunk)
                    if i in numbers:
                        numbers[i][row:row + k] = np.frombuffer(chunk.buffers()[1], dtype=numbers[i].dtype, count=k,
                                                                offset=chunk.offset * numbers[i].itemsize)
                    elif k:
                        src = np.frombuffer(chunk.buffers()[1], dtype=np.int32, count=k + 1, offset=chunk.offset * 4)
                        lo, hi = int(src[0]), int(src[k])
                        if used[i] + hi - lo > size:
                            return None  # the file grew while it was read
                        data[i][used[i]:used[i] + hi - lo] = np.frombuffer(chunk.buffers()[2], dtype=np.uint8,
                                                                           count=hi - lo, offset=lo)
                        np.add(src[1:], used[i] - lo, out=offsets[i][row + 1:row + k + 1])
                        used[i] += hi - lo
                    row += k
            n += m
            del table, column
            kept = max(end - cut, 0)
            if kept:
                buf[:kept] = buf[cut:end]
    if n == 0:
        return None
    return {i: numbers[i][:n] if i in numbers else
            pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets[i][:n + 1]), pa.py_buffer(data[i][:used[i]])])
            for i in types}


def _first_line(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.readline(1 << 16)


def _fast_table(data: bytes, ncols: int, types: dict[int, pa.DataType]) -> pa.Table:
    """Parse with pyarrow: as is when the text is plain (single spaces, LF line ends, no
    comment, no other blank, no empty field: the common case), else normalised first (then
    every run of blanks is one space, so no field is empty either). :class:`_SlowPath` when
    pyarrow cannot read it (rows of unequal length, a number it cannot read)."""
    if re.search(rb"\S", data) is None:
        return pa.table({f"f{i}": pa.array([], type=t) for i, t in types.items()})
    # memchr-fast checks first; an empty field would put every field after it a column on
    plain = not (b"\t" in data or b"\r" in data or b"#" in data or _other_blank(data, 0, len(data))) \
        and _no_empty_field(np.frombuffer(data, dtype=np.uint8))
    try:
        table = _read_table(data if plain else _normalise(data), types)
    except (pa.ArrowInvalid, pa.ArrowKeyError, pa.ArrowTypeError, TypeError):
        raise _SlowPath("pyarrow could not read it") from None
    if table.num_columns != len(types):
        raise _SlowPath("pyarrow could not read it")
    return table


#: characters ``str.split()`` splits at that are no blank to trec_eval (C's ``isspace``) or to
#: pyarrow's separators: inside an id, every reader keeps them
_OTHER_WHITESPACE = "\x1c\x1d\x1e\x1f\x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
_OTHER_WHITESPACE_RE = re.compile(f"[{_OTHER_WHITESPACE}]")
_ASCII_BLANKS = re.compile("[ \t\r\x0b\x0c]+")


def _split_at_blanks(line: str) -> list[str]:
    """The fields of ``line`` between runs of ASCII blanks (space, tab, CR, vertical tab, form
    feed) only."""
    return [field for field in _ASCII_BLANKS.split(line) if field]


def _text_lines(path: Path, data: bytes, first_line: int = 1):
    """``(line number, fields)`` of each line that is neither blank nor a comment; fields are
    split at runs of ASCII blanks, as by trec_eval and the fast readers."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad_line = data[: exc.start].count(b"\n") + first_line
        raise InputError("is not UTF-8 text", path=str(path), line=bad_line) from None
    # str.split() also splits at other whitespace: only a text holding some needs the slower split
    other = any(c in data for c in (b"\x1c", b"\x1d", b"\x1e", b"\x1f")) or (
        not data.isascii() and _OTHER_WHITESPACE_RE.search(text) is not None)
    split = _split_at_blanks if other else str.split
    for lineno, line in enumerate(text.split("\n"), start=first_line):
        fields = split(line)
        if fields and not fields[0].startswith("#"):
            yield lineno, fields


def check_regular_file(path: str | Path) -> Path:
    """``path`` as a :class:`Path` when it names a readable regular file (symlinks followed);
    else :class:`InputError` saying what it is. Devices and FIFOs are refused before anything
    opens them: ``/dev/zero`` never ends and a FIFO blocks until a writer comes."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        hint = " (a symlink whose target is missing)" if path.is_symlink() else ""
        raise InputError(f"file not found{hint}", path=str(path)) from None
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            raise InputError("symlink loop: the link points back at itself", path=str(path)) from None
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from None
    if stat.S_ISDIR(mode):
        raise InputError("is a directory, expected a file", path=str(path))
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"
        raise InputError(f"is {kind}, expected a regular file", path=str(path))
    return path


def _read_bytes(path: str | Path) -> tuple[Path, bytes]:
    """The file's bytes, without a leading UTF-8 byte-order mark."""
    path = check_regular_file(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from None
    return path, data[3:] if data.startswith(_BOM) else data


def read_trec_run(path: str | Path, *, name: str | None = None, careful: bool = False) -> Run:
    """Read a TREC run file. ``name`` defaults to the file's stem.

    ``careful=True`` skips the fast path and records each row's line number (used to point at
    a duplicate found later).
    """
    path = Path(path)
    name = name if name is not None else path.stem
    types = {0: pa.string(), 2: pa.string(), 4: pa.float64()}
    path = check_regular_file(path)
    columns = None if careful else _block_columns(path, types, 6, lambda fields: fields >= 6)
    if columns is not None and np.isfinite(columns[4]).all():
        return Run(columns[0], columns[2], columns[4], source=str(path), name=name)
    path, data = _read_bytes(path)
    return _run_from_bytes(path, data, name, careful=careful)


def _run_from_bytes(path: Path, data: bytes, name: str, *, careful: bool = False, first_line: int = 1) -> Run:
    """Parse run lines (whole lines, no byte-order mark); ``first_line`` is the file line of
    ``data``'s first line, for the error messages and ``lines``."""
    types = {0: pa.string(), 2: pa.string(), 4: pa.float64()}
    try:
        if careful:
            raise _SlowPath("asked")
        table = _fast_table(data, 6, types)
        scores = _column(table, "f4", np.float64)
        if scores is None or not np.isfinite(scores).all():
            raise _SlowPath("not finite")
        if table.num_rows and _ncols_first_line(data) < 6:
            raise _SlowPath("short")  # pyarrow only checks rows agree with the first one
        return Run(
            table.column("f0").combine_chunks(),
            table.column("f2").combine_chunks(),
            scores,
            source=str(path),
            name=name,
        )
    except _SlowPath:
        pass
    qids: list[str] = []
    docs: list[str] = []
    scores_l: list[float] = []
    lines: list[int] = []
    for lineno, fields in _text_lines(path, data, first_line):
        if len(fields) < 6:
            hint = ""
            if len(fields) == 3:
                hint = " (three fields: a run needs rank, score and tag after the doc id)"
            elif len(fields) == 4:
                hint = " (four fields: this looks like a qrels file)"
            raise InputError(
                f"expected {len(RUN_FIELDS.split())} fields '{RUN_FIELDS}', got {len(fields)}{hint}: "
                f"{clip(' '.join(fields))}",
                path=str(path),
                line=lineno,
            )
        try:
            score = float(fields[4])
        except ValueError:
            raise InputError(
                f"score (5th field) must be a number, got {clip(fields[4])}", path=str(path), line=lineno
            ) from None
        if not math.isfinite(score):  # nan, inf, -inf, 1e400: no rank can be given to them
            raise InputError(
                f"score (5th field) must be a finite number, got {clip(fields[4])}", path=str(path), line=lineno
            )
        qids.append(fields[0])
        docs.append(fields[2])
        scores_l.append(score)
        lines.append(lineno)
    return Run(
        pa.array(qids, type=pa.string()),
        pa.array(docs, type=pa.string()),
        np.array(scores_l, dtype=np.float64),
        lines=np.array(lines, dtype=np.int64),
        source=str(path),
        name=name,
    )


# --- large run files, by parts of whole queries -----------------------------------------
#: run rows scored at once: a run file estimated to hold more is split into parts of whole
#: queries, each about this size, so the memory of an evaluation follows the part, not the file
DEFAULT_BLOCK_ROWS = 1 << 22
_CHUNK_BYTES = 1 << 25  # file text parsed at a time while splitting (whole lines)
#: text per block of pyarrow's streaming reader: it holds several blocks (text and parsed
#: columns) at once, so its peak memory grows with the block; smaller blocks cost no more CPU
_STREAM_BLOCK_BYTES = 1 << 23
_RUN_SCHEMA = pa.schema([("query_id", pa.string()), ("doc_id", pa.string()), ("score", pa.float64())])


def query_parts(query_ids: pa.Array | pa.ChunkedArray, n_parts: int) -> np.ndarray:
    """The part (0 .. n_parts-1, uint16) of each query id: ``(id_hash(id) >> 32) mod n_parts``
    (:mod:`workbench.core.metrics.id_hash`), so one id falls in the same part in every column
    and process (qrels and run). Rows of one query that follow each other are hashed once."""
    if n_parts <= 1:
        return np.zeros(len(query_ids), dtype=np.uint16)
    return ((grouped_id_hash(query_ids) >> np.uint64(32)) % np.uint64(n_parts)).astype(np.uint16)


class RunParts:
    """A TREC run file as parts, each holding whole queries (every row of a query it holds).

    Iterating yields one :class:`Run` per part (``partial=True`` when there are several), in
    part order, once (a part is read, handed over and forgotten); the rows of a part keep
    their file order. A file small enough (estimated rows
    <= ``block_rows``) is one part read as :func:`read_trec_run` reads it. A larger one is read
    once (streamed by pyarrow when the file is plain, else ``_CHUNK_BYTES`` of whole lines at a
    time), and each row written to the temporary
    Arrow file of its query's part (:func:`query_parts`: a hash of the query id, so the rows of
    a query scattered anywhere in the file meet in one part whatever the file's order; a plain
    file whose rows are grouped by query is cut into ranges of whole queries instead,
    :func:`_write_ranges`); the files are deleted as they are read and by :meth:`close`.
    """

    def __init__(self, source: str, name: str, n_parts: int, n_rows: int, first_doc_id: str | None,
                 loaded: Run | None = None, directory: str | None = None,
                 heads: tuple[np.ndarray, np.ndarray] | None = None):
        self.source, self.name, self.n_parts, self.n_rows = source, name, n_parts, n_rows
        self.first_doc_id = first_doc_id
        self._loaded, self._directory = loaded, directory
        #: a file grouped by query, split into ranges of whole queries: each query's id hash
        #: (sorted, no repeats) and its part; None when the parts are chosen by the hash
        self._heads = heads

    def __len__(self) -> int:
        return self.n_rows

    def part_of(self, query_ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """The part of each query id (for splitting the qrels the same way). A file split into
        ranges: the part holding the run query of that id hash; an id the run does not have
        goes to the part :func:`query_parts` gives (all its rows to one part: any will do)."""
        if self._heads is None or self.n_parts <= 1:
            return query_parts(query_ids, self.n_parts)
        keys, parts = self._heads
        arr = query_ids.combine_chunks() if isinstance(query_ids, pa.ChunkedArray) else query_ids
        heads = run_heads(arr)  # qrels grouped by query: one search per query, not per row
        h = id_hash(arr if heads is None else take(arr, heads))
        at = np.minimum(np.searchsorted(keys, h), len(keys) - 1)
        found = keys[at] == h
        out = ((h >> np.uint64(32)) % np.uint64(self.n_parts)).astype(np.uint16)
        out[found] = parts[at[found]]
        return out if heads is None else np.repeat(out, np.diff(np.r_[heads, len(arr)]))

    def __iter__(self) -> Iterator[Run]:
        """The parts, once: each is handed over (not kept), so its memory goes with its last user."""
        if self._directory is None:
            run = self._hand_over()
            if run is not None:
                yield run
            return
        for p in range(self.n_parts):
            yield self._read_part(p)
        self.close()

    def _hand_over(self) -> Run | None:
        run, self._loaded = self._loaded, None
        return run

    def _read_part(self, p: int) -> Run:
        file = os.path.join(self._directory or "", f"{p}.arrow")
        if not os.path.exists(file):  # no row of the file hashed here
            empty = pa.array([], type=pa.string())
            return Run(empty, empty, np.zeros(0), source=self.source, name=self.name, partial=True)
        with pa.memory_map(file, "rb") as src:  # mapped: the one copy is combine_chunks'
            table = pa.ipc.open_stream(src).read_all()
        os.remove(file)  # the mapping stays readable until the columns below are copied out
        return Run(table.column(0).combine_chunks(), table.column(1).combine_chunks(),
                   to_numpy(table.column(2), np.float64), source=self.source, name=self.name, partial=True)

    def close(self) -> None:
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None

    def __enter__(self) -> RunParts:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def _estimated_rows(path: Path, size: int) -> int:
    """Lines in the file, from the line length of its first MB."""
    with path.open("rb") as f:
        head = f.read(1 << 20)
    if len(head) >= size:
        return head.count(b"\n") + (not head.endswith(b"\n"))
    return int(size * max(head.count(b"\n"), 1) / len(head)) + 1


def _line_chunks(path: Path, size: int) -> Iterator[tuple[bytes, int]]:
    """The file as chunks of whole lines (about ``size`` bytes, the byte-order mark dropped),
    each with the file line number of its first line."""
    rest, line, first = b"", 1, True
    with path.open("rb") as f:
        while True:
            block = f.read(size)
            if first:
                block, first = (block[3:] if block.startswith(_BOM) else block), False
            if not block:
                if rest:
                    yield rest, line
                return
            data = rest + block if rest else block
            cut = data.rfind(b"\n") + 1
            if not cut:  # a line longer than a chunk: read on
                rest = data
                continue
            chunk, rest = data[:cut], data[cut:]
            yield chunk, line
            line += chunk.count(b"\n")


def read_trec_run_parts(path: str | Path, *, name: str | None = None, block_rows: int = DEFAULT_BLOCK_ROWS,
                        chunk_bytes: int = _CHUNK_BYTES) -> RunParts:
    """A TREC run file as :class:`RunParts` of about ``block_rows`` rows each (one part when
    it is estimated to fit; the estimate is the file size over the line length of its first
    MB). Malformed lines raise the same :class:`InputError` (file and line) as
    :func:`read_trec_run`, before any part is scored. ``chunk_bytes``: the file text parsed
    at a time while splitting."""
    if isinstance(block_rows, bool) or not isinstance(block_rows, int) or block_rows < 1:
        raise ValueError(f"block_rows must be a positive integer, got {block_rows!r}")
    path = check_regular_file(Path(path))
    name = name if name is not None else path.stem
    estimate = _estimated_rows(path, path.stat().st_size)
    if estimate <= block_rows:
        run = read_trec_run(path, name=name)
        return RunParts(str(path), name, 1, len(run), run.first_doc_id, loaded=run)
    n_parts = min(-(-estimate * 5 // (4 * block_rows)), 1 << 16)  # 25% slack: parts differ a little
    directory = lazylibs.tempfile.mkdtemp(prefix="workbench-run-parts-")
    try:
        n_rows, first, n_parts, heads = _split_run(path, name, n_parts, directory, chunk_bytes)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return RunParts(str(path), name, n_parts, n_rows, first, directory=directory, heads=heads)


def _split_run(path: Path, name: str, n_parts: int, directory: str,
               chunk_bytes: int) -> tuple[int, str | None, int, tuple[np.ndarray, np.ndarray] | None]:
    """Write each row to its part's Arrow file; the rows, the first doc id, the parts and
    (ranges only) the query heads of :class:`RunParts`.

    A plain file is parsed by pyarrow as it streams it. When its rows are grouped by query
    (each query's rows together, as most tools write runs) it is cut into ranges of whole
    queries (:func:`_write_ranges`: no hash per row, no reordering); else it is split by the
    hash of the query id, from its first block on when that block is not grouped, read again
    when the pass finds a query in two places further on.
    Anything the streaming reader refuses is read again, from the start, by whole-line chunks
    through :func:`_run_from_bytes` (the rewrite and the careful parser, with their error
    messages)."""
    plain = _plain_text(path)
    if plain is not None and _ncols_first_line(_first_line(path)) >= 6:
        ascii_only, sep = plain
        block = min(chunk_bytes, _STREAM_BLOCK_BYTES)
        rows_per_part = -(-_estimated_rows(path, path.stat().st_size) // n_parts)
        # each stream is closed as soon as it is given up: an abandoned pyarrow reader keeps
        # its read-ahead (hundreds of MB on a large file) until it is collected
        runs = _streamed_runs(path, name, block, ascii_only=ascii_only, sep=sep)
        scattered = None
        try:
            try:
                return _write_ranges(runs, rows_per_part, directory)
            except _NotGrouped as exc:
                scattered = exc.args[0] if exc.args else None
            _clear(directory)
            if scattered is not None:  # its first block is not grouped: hash from there, no re-read
                return (*_write_parts(chain([scattered], runs), n_parts, directory), n_parts, None)
            rest = None  # found out later in the file: read it again
        except _SlowPath:
            _clear(directory)
            rest = _SlowPath
        finally:
            runs.close()
        if rest is None:
            runs = _streamed_runs(path, name, block, ascii_only=ascii_only, sep=sep)
            try:
                return (*_write_parts(runs, n_parts, directory), n_parts, None)
            except _SlowPath:
                _clear(directory)
            finally:
                runs.close()
    chunks = (_run_from_bytes(path, data, name, first_line=first_line)
              for data, first_line in _line_chunks(path, chunk_bytes))
    return (*_write_parts(chunks, n_parts, directory), n_parts, None)


def _clear(directory: str) -> None:
    for file in os.listdir(directory):
        os.remove(os.path.join(directory, file))


class _NotGrouped(Exception):
    """The rows of some query are not all together: split by the hash of the query id. Its
    argument, when given, is the stream's first block (nothing was written before it)."""


def _write_ranges(runs: Iterator[Run], rows_per_part: int,
                  directory: str) -> tuple[int, str | None, int, tuple[np.ndarray, np.ndarray]]:
    """Cut a run whose rows are grouped by query into parts of consecutive whole queries, a
    part closing at the first query that starts once it holds ``rows_per_part`` rows; each
    part's rows go to its Arrow file in file order. Returns the rows, the first doc id, the
    parts and each query's id hash (sorted) with its part.

    Raises :class:`_NotGrouped` when a block of the stream has more than a quarter as many
    queries as rows (:func:`~workbench.core.metrics.id_hash.run_heads`), when two places of the
    file start the same query id hash (a query in two places, or two ids sharing a hash), or
    past 65,536 parts."""
    sinks: list[tuple] = []
    hashes: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    n_rows, first, in_part, last_id = 0, None, 0, None

    def open_part() -> None:
        if len(sinks) == 1 << 16:
            raise _NotGrouped()  # too many parts
        sink = pa.OSFile(os.path.join(directory, f"{len(sinks)}.arrow"), "wb")
        sinks.append((sink, pa.ipc.new_stream(sink, _RUN_SCHEMA)))

    try:
        for run in runs:
            n = len(run)
            if not n:
                continue
            if first is None:
                first = run.first_doc_id
                open_part()
            n_rows += n
            heads = run_heads(run.query_ids)
            if heads is None:
                raise _NotGrouped(*([run] if n_rows == n else []))
            if last_id is not None and run.query_ids[0].as_py() == last_id:
                heads = heads[1:]  # the block goes on with the previous block's last query
            last_id = run.query_ids[n - 1].as_py()
            batch = pa.record_batch([run.query_ids, run.doc_ids, from_numpy(run.scores)], schema=_RUN_SCHEMA)
            first_part, cuts, pos = len(sinks) - 1, [], 0
            while pos < n:
                k = int(np.searchsorted(heads, pos + max(rows_per_part - in_part, 0)))
                end = n if k == len(heads) else int(heads[k])
                if end > pos:
                    sinks[-1][1].write_batch(batch.slice(pos, end - pos))
                    in_part += end - pos
                    pos = end
                if k < len(heads) and in_part:
                    open_part()
                    cuts.append(pos)
                    in_part = 0
            hashes.append(id_hash(take(run.query_ids, heads)))
            labels.append(first_part + np.searchsorted(np.array(cuts, dtype=np.int64), heads, side="right"))
    finally:
        for sink, writer in sinks:
            writer.close()
            sink.close()
    keys = np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.uint64)
    parts = np.concatenate(labels).astype(np.uint16) if labels else np.zeros(0, dtype=np.uint16)
    order = np.argsort(keys, kind="stable")
    keys, parts = keys[order], parts[order]
    if len(keys) > 1 and np.any(keys[1:] == keys[:-1]):
        raise _NotGrouped()  # a query id hash starts two ranges
    return n_rows, first, max(len(sinks), 1), (keys, parts)


def _streamed_runs(path: Path, name: str, block_bytes: int, *, ascii_only: bool = False,
                   sep: bytes = b" ") -> Generator[Run, None, None]:
    """The run file as pyarrow's streaming CSV reader parses it, ``block_bytes`` of text at a
    time (no copy of the text in Python); :class:`_SlowPath` on anything it does not read as
    six or more fields separated by one ``sep`` each, with a finite score. ``ascii_only``: the
    file is all ASCII (:func:`_as_read`)."""
    types = _as_read({0: pa.string(), 2: pa.string(), 4: pa.float64()}, ascii_only)
    try:
        reader = pacsv.open_csv(str(path), **_csv_options(types, max(block_bytes, 1 << 10), sep))
    except (pa.ArrowInvalid, pa.ArrowKeyError, pa.ArrowTypeError, OSError):
        raise _SlowPath("pyarrow could not open it") from None
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except (pa.ArrowInvalid, pa.ArrowKeyError, pa.ArrowTypeError, OSError):
            raise _SlowPath("pyarrow could not read it") from None
        if batch.num_columns != len(types):
            raise _SlowPath("not the run's columns")
        scores = batch.column(2)
        if scores.null_count:
            raise _SlowPath("a score pyarrow could not read")
        values = to_numpy(scores, np.float64)
        if not np.isfinite(values).all():
            raise _SlowPath("not finite")  # the careful reader names the line
        yield Run(_as_strings(batch.column(0)), _as_strings(batch.column(1)), values, source=str(path), name=name)


def _write_parts(runs: Iterator[Run], n_parts: int, directory: str) -> tuple[int, str | None]:
    sinks: dict[int, tuple] = {}
    n_rows, first = 0, None
    try:
        for run in runs:
            if not len(run):
                continue
            if first is None:
                first = run.first_doc_id
            n_rows += len(run)
            part = query_parts(run.query_ids, n_parts)
            order = np.argsort(part, kind="stable")  # radix sort of 16-bit keys; rows keep file order
            bounds = np.searchsorted(part[order], np.arange(n_parts + 1))
            batch = pa.record_batch([run.query_ids, run.doc_ids, from_numpy(run.scores)], schema=_RUN_SCHEMA)
            batch = take(batch, order)
            del run, order
            for p in np.flatnonzero(np.diff(bounds)).tolist():
                if p not in sinks:
                    sink = pa.OSFile(os.path.join(directory, f"{p}.arrow"), "wb")
                    sinks[p] = (sink, pa.ipc.new_stream(sink, _RUN_SCHEMA))
                sinks[p][1].write_batch(batch.slice(int(bounds[p]), int(bounds[p + 1] - bounds[p])))
    finally:
        for sink, writer in sinks.values():
            writer.close()
            sink.close()
    return n_rows, first


def pair_lines(path: str | Path, query_id: str, doc_id: str, limit: int = 2) -> list[int]:
    """File lines (1-based, at most ``limit``) of the TREC run or qrels lines holding ``doc_id``
    for ``query_id`` (1st and 3rd fields): where a repeated pair is (one pass, error path only)."""
    qb, db = query_id.encode(), doc_id.encode()
    found: list[int] = []
    for data, first_line in _line_chunks(Path(path), _CHUNK_BYTES):
        at = data.find(db)
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end
            fields = data[start:end].split()
            if len(fields) >= 3 and fields[0] == qb and fields[2] == db:
                found.append(first_line + data.count(b"\n", 0, start))
                if len(found) == limit:
                    return found
            at = data.find(db, end)
    return found


def read_trec_qrels(path: str | Path, *, careful: bool = False) -> Qrels:
    """Read a TREC qrels file (``query_id iteration doc_id grade``); ``careful`` as for runs."""
    path = Path(path)
    types = {0: pa.string(), 2: pa.string(), 3: pa.int64()}
    path = check_regular_file(path)
    columns = None if careful else _block_columns(path, types, 4, lambda fields: fields == 4)
    if columns is not None:
        return Qrels(columns[0], columns[2], columns[3], source=str(path))
    path, data = _read_bytes(path)
    try:
        if careful:
            raise _SlowPath("asked")
        table = _fast_table(data, 4, types)
        if table.num_rows and _ncols_first_line(data) != 4:
            raise _SlowPath("columns")
        grades = _column(table, "f3", np.int64)
        if grades is None:
            raise _SlowPath("null grade")
        return Qrels(
            table.column("f0").combine_chunks(),
            table.column("f2").combine_chunks(),
            grades,
            source=str(path),
        )
    except _SlowPath:
        pass
    def check(lineno: int, fields: list[str]) -> None:
        if len(fields) != 4:
            hint = " (this looks like a run file)" if len(fields) >= 6 else ""
            raise InputError(
                f"expected 4 fields '{QRELS_FIELDS}', got {len(fields)}{hint}: {clip(' '.join(fields))}",
                path=str(path),
                line=lineno,
            )

    return _qrels_from_lines(path, data, check, (0, 2, 3), "grade (4th field)")


def _qrels_from_lines(path: Path, data: bytes, check, columns: tuple[int, int, int], grade_name: str,
                      skip=lambda lineno, fields: False) -> Qrels:
    """The careful line-by-line qrels parser: ``check`` raises on a malformed line, ``columns``
    are the positions of query id, doc id and grade; errors name the file and line."""
    qids, docs, grades, lines = [], [], [], []
    q_at, d_at, g_at = columns
    for lineno, fields in _text_lines(path, data):
        if skip(lineno, fields):
            continue
        check(lineno, fields)
        try:
            grade = int(fields[g_at])
        except ValueError:
            raise InputError(
                f"{grade_name} must be an integer, got {clip(fields[g_at])}", path=str(path), line=lineno
            ) from None
        if not _INT64_MIN <= grade <= _INT64_MAX:
            raise InputError(f"{grade_name} {clip(fields[g_at])} is too large; grades are small integers "
                             "such as 0, 1, 2, 3", path=str(path), line=lineno)
        qids.append(fields[q_at])
        docs.append(fields[d_at])
        grades.append(grade)
        lines.append(lineno)
    return Qrels(
        pa.array(qids, type=pa.string()),
        pa.array(docs, type=pa.string()),
        np.array(grades, dtype=np.int64),
        lines=np.array(lines, dtype=np.int64),
        source=str(path),
    )


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _ncols_first_line(data: bytes) -> int:
    """Fields on the first of the first 64 lines that is neither blank nor a comment (0 if none)."""
    start = 0
    for _ in range(64):  # line by line: splitting the whole text would copy all of it
        end = data.find(b"\n", start)
        raw = data[start:] if end < 0 else data[start:end]
        start = end + 1
        fields = raw.split()
        if fields and not fields[0].startswith(b"#"):
            return len(fields)
        if end < 0:
            break
    return 0


# --- BEIR and JSONL -----------------------------------------------------------------------
def read_beir_qrels(path: str | Path) -> Qrels:
    """Read BEIR ``query-id<TAB>corpus-id<TAB>score`` qrels, header line optional.

    The fields must be separated by tabs: three space-separated fields such as ``q1 Q0 d7`` are
    a truncated run, and reading its doc id as a grade would score everything 0.
    """
    path, data = _read_bytes(path)
    seen_data = False
    raw_lines = data.split(b"\n")

    def is_header(lineno: int, fields: list[str]) -> bool:
        # Only the first non-blank line may be the header.
        nonlocal seen_data
        header = not seen_data and [f.lower() for f in fields] == ["query-id", "corpus-id", "score"]
        seen_data = True
        return header

    def check(lineno: int, fields: list[str]) -> None:
        if len(fields) != 3 or raw_lines[lineno - 1].count(b"\t") < 2:
            hint = ""
            if len(fields) == 3 and fields[1] in ("Q0", "0"):
                hint = " (this looks like a run without rank, score and tag)"
            raise InputError(
                f"expected 3 tab-separated fields 'query-id corpus-id score' (BEIR) or 4 fields "
                f"'{QRELS_FIELDS}' (TREC), got {len(fields)}"
                f"{' separated by spaces' if len(fields) == 3 else ''}{hint}: {clip(' '.join(fields))}",
                path=str(path),
                line=lineno,
            )

    return _qrels_from_lines(path, data, check, (0, 1, 2), "score (3rd field)", skip=is_header)


def read_jsonl_qrels(path: str | Path) -> Qrels:
    """Read the dataset JSONL (``{"query_id", "query", "relevant": {doc_id: grade}, "tags"}``)."""
    path, data = _read_bytes(path)
    qids, docs, grades, lines = [], [], [], []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("is not UTF-8 text", path=str(path), line=data[: exc.start].count(b"\n") + 1) from None
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        row = load_json_line(line, str(path), lineno, invalid="invalid JSON: {msg}")
        if not isinstance(row, dict) or "query_id" not in row or not isinstance(row.get("relevant"), dict):
            raise InputError(
                'expected an object with "query_id" and "relevant": {doc_id: grade}',
                path=str(path),
                line=lineno,
            )
        qid = row["query_id"]
        if isinstance(qid, bool) or not isinstance(qid, (str, int)) or qid == "":
            raise InputError(f'"query_id" must be a non-empty string, got {clip(json.dumps(qid), quote=False)}',
                             path=str(path), line=lineno)
        qid = str(qid)
        for doc, grade in row["relevant"].items():
            if isinstance(grade, bool) or not isinstance(grade, int):
                raise InputError(
                    f"grade of {clip(doc)} must be an integer, got {clip(grade)}", path=str(path), line=lineno
                )
            if not _INT64_MIN <= grade <= _INT64_MAX:
                raise InputError(f"grade of {clip(doc)} is too large: {clip(grade)}; grades are small "
                                 "integers such as 0, 1, 2, 3", path=str(path), line=lineno)
            qids.append(qid)
            docs.append(str(doc))
            grades.append(grade)
            lines.append(lineno)
    return Qrels(
        pa.array(qids, type=pa.string()),
        pa.array(docs, type=pa.string()),
        np.array(grades, dtype=np.int64),
        lines=np.array(lines, dtype=np.int64),
        source=str(path),
    )


def read_qrels(path: str | Path) -> Qrels:
    """Read qrels in any supported format, chosen by extension and first line: JSONL
    (``.jsonl``/``.json``/``.ndjson`` or a first line starting with ``{``), BEIR (a
    ``query-id`` header or three fields on the first line), else TREC."""
    path = check_regular_file(path)
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        return read_jsonl_qrels(path)
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return read_trec_qrels(path)  # reports the problem with the path
    head = head[3:] if head.startswith(_BOM) else head
    if head.lstrip().startswith(b"{"):
        return read_jsonl_qrels(path)
    ncols = _ncols_first_line(head)
    if head.lower().startswith(b"query-id") or ncols == 3:
        return read_beir_qrels(path)
    return read_trec_qrels(path)
