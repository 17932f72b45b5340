"""Read the escaped HTML tables the app draws with ``context.table`` (stdlib parser only)."""

from __future__ import annotations

from html.parser import HTMLParser


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[dict]] = {}
        self._key = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._head: list[str] = []
        self._rows: list[list[str]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._key, self._head, self._rows = dict(attrs).get("data-table", ""), [], []
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if not self._head:
                self._head = self._row
            else:
                self._rows.append(self._row)
            self._row = None
        elif tag == "table":
            self.tables[self._key] = [dict(zip(self._head, r)) for r in self._rows]


def html_tables(at) -> dict[str, list[dict]]:
    """``{data-table key: [row dicts]}`` of every ``context.table`` in an AppTest run."""
    parser = _Tables()
    for element in at.get("html"):
        parser.feed(element.proto.body)
    return parser.tables
