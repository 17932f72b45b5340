"""Queries & Labels: the project's queries (text, description, tags) and their labels (grade,
source, assessor), each label's span shown highlighted inside its document (an SME label with
evidence: the evidence spans the SME chose, with their comment).

Filters: one query (or all), grades, sources, assessors. Read-only, through
:mod:`workbench.services.browse`. Every labelled passage of a chosen query is shown; over all
queries, the first :data:`SHOWN_PASSAGES` (and the first :data:`SHOWN_LABELS` rows of the labels
table, counted, filtered and paged in SQL so the page costs the same on a million labels). The assessors offered are those of the labels the
user may see (an annotator: their own and the imported ones, :mod:`workbench.services.visibility`).

Below the labels, the grade each (query, document) pair gets under the project's one merge
policy (:func:`workbench.services.qrels.rule.pair_grades`, the grades export, pool statistics and
evaluation use), with the policy stated above the table and the tier that decided each pair.
The raw labels above stay per source on purpose: they are what the policy merges. An annotator,
who sees only their own labels, is not shown the merged grades (they carry other people's).
Corpus text and query text are untrusted: shown with ``html.escape`` per segment
(:mod:`workbench.ui.highlight`) or in tables, never as markdown.
"""

from __future__ import annotations

import html

import streamlit as st

from workbench.errors import WorkbenchError
from workbench.services import access
from workbench.services.browse import (
    count_labels,
    document_titles,
    label_document,
    label_facets,
    labels_table,
    queries_table,
)
from workbench.services.qrels.rule import pair_grades
from workbench.ui import context
from workbench.ui.highlight import evidence_html, marked_span_html
from workbench.ui.words import cell, params_text, qrels_note

ALL = "All queries"
GRADES = (3, 2, 1, 0)
SOURCE_WORDS = {"human": "human (SME)", "imported": "imported", "llm": "LLM judge"}
SHOWN_PASSAGES = 20  # passages rendered for "All queries"; a chosen query shows all of its own
SHOWN_LABELS = 1000  # label rows listed for "All queries" (the count says how many match)
MERGED_QUERIES = 50  # "All queries" on a project of more than SHOWN_LABELS labels: merged grades of these
TIER_WORDS = {"adjudicated": "resolved by a lead", "sme": "SME", "imported": "imported", "llm": "LLM judge",
              "propagated": "copied to a near-duplicate"}


def _query_label(texts: dict, query_id: str) -> str:
    """``query_id — snippet`` (``texts``: query_id -> text, built once: a lookup per option keeps
    a list of 10,000 queries linear)."""
    if query_id == ALL:
        return ALL
    snippet = str(texts.get(query_id, ""))
    snippet = snippet if len(snippet) <= 70 else snippet[:70].rsplit(" ", 1)[0] + " …"
    return f"{query_id} — {snippet}"


@context.page_run
def render() -> None:
    st.title("Queries & Labels")
    st.caption("Every query with its description and tags, and the labels given to it: the grade, "
               "who gave it, and the labelled passage highlighted in its document.")
    with context.project() as db:
        queries = queries_table(db)
        facets = label_facets(db)
    if queries.empty:
        st.info("No queries yet. Import queries on the Data page.")
        context.page_link("data", "Go to Data", icon=":material/arrow_forward:")
        return

    query_texts = dict(zip(queries["query_id"], queries["text"]))
    cols = st.columns([3, 2, 2, 2])
    chosen = cols[0].selectbox("Query", [ALL, *queries["query_id"].tolist()], key="browse_query",
                               format_func=lambda q: _query_label(query_texts, q))
    grades = cols[1].multiselect("Grades", GRADES, default=list(GRADES), key="browse_grades",
                                 help="3 fully answers, 2 answers part or gives essential support, "
                                      "1 on topic but does not help, 0 irrelevant.")
    sources = facets["sources"]
    chosen_sources = cols[2].multiselect("Sources", sources, default=sources, key="browse_sources",
                                         format_func=lambda s: SOURCE_WORDS.get(s, s))
    assessors = facets["assessors"]
    chosen_assessors = cols[3].multiselect("Assessors", assessors, key="browse_assessors",
                                           placeholder="All assessors", help="None chosen: every assessor.")

    shown = queries if chosen == ALL else queries.loc[queries["query_id"] == chosen]
    if chosen != ALL:
        q = shown.iloc[0]
        tags = params_text(q["tags"])
        st.html(
            f'<div style="font-size: 1.15em; font-weight: 600">{html.escape(str(q["text"]))}</div>'
            + (f'<div style="margin-top: 0.3em">{html.escape(str(cell(q["description"])))}</div>'
               if cell(q["description"]) != "" else "")
            + (f'<div style="margin-top: 0.3em; color: rgba(49, 51, 63, 0.7); font-size: 0.9em">'
               f'tags: {html.escape(tags)}</div>' if tags else ""))
    st.subheader("Query" if chosen != ALL else f"Queries ({len(queries):,})")
    st.dataframe(
        [{"query": q.query_id, "text": q.text, "description": cell(q.description),
          "tags": params_text(q.tags), "labels": int(q.labels)} for q in shown.itertuples(index=False)],
        hide_index=True, width="stretch", key="browse_queries")

    # "All queries" lists one page of the labels (read with LIMIT); a chosen query lists all of its own
    wanted = dict(query_ids=None if chosen == ALL else [chosen], grades=grades, sources=chosen_sources,
                  assessors=chosen_assessors or None)
    with context.project() as db:
        labels = labels_table(db, **wanted, limit=SHOWN_LABELS if chosen == ALL else None)
        total = count_labels(db, **wanted) if len(labels) >= SHOWN_LABELS and chosen == ALL else len(labels)
    merged_for = _merged_queries(chosen, queries, facets["labels"])
    st.subheader(f"Labels ({total:,})")
    if not facets["labels"]:
        st.info("No labels yet. Import qrels on the Data page, or label pool pairs when labelling "
                "is available.")
        return
    if labels.empty:
        st.info("No label matches these filters. Choose more grades, sources or assessors, or another query.")
        _merged(merged_for)
        return
    if total > len(labels):
        st.caption(f"Listing the first {len(labels):,} of {total:,} labels; choose a query to list all of its own.")
    st.dataframe(
        [{"query": r.query_id, "document": r.doc_id, "title": cell(r.title), "span": f"{r.start}–{r.end}",
          "grade": int(r.grade), "source": SOURCE_WORDS.get(r.source, r.source), "assessor": r.assessor,
          "comment": r.comment or ""}
         for r in labels.itertuples(index=False)],
        hide_index=True, width="stretch", key="browse_labels")
    _merged(merged_for)

    st.subheader("Labelled passages")
    whole = st.checkbox("Show whole documents", key="browse_whole",
                        help="Otherwise a few lines of context are shown around each passage.")
    passages = labels
    if chosen == ALL and total > SHOWN_PASSAGES:
        passages = labels.head(SHOWN_PASSAGES)
        st.caption(f"Showing the first {SHOWN_PASSAGES} of {total:,} labels; choose a query to see "
                   f"every passage of it.")
    texts: dict[str, str] = {}
    with context.project() as db:
        for doc_id in passages["doc_id"].unique():
            texts[doc_id] = label_document(db, doc_id)
    for r in passages.itertuples(index=False):
        title = cell(r.title)
        head = (f"{r.query_id} · {r.doc_id}" + (f" — {title}" if title else "")
                + f" · grade {int(r.grade)} · {SOURCE_WORDS.get(r.source, r.source)} · {r.assessor}")
        # An SME's label shows the sentences they chose as evidence, not the whole passage.
        evidence = r.evidence if isinstance(r.evidence, list) and r.evidence else None
        if evidence:
            body = evidence_html(texts[r.doc_id], r.start, r.end, evidence, grade=int(r.grade),
                                 window=None if whole else 300)
        else:
            body = marked_span_html(texts[r.doc_id], r.start, r.end, grade=int(r.grade),
                                    window=None if whole else 300)
        comment = (f'<div data-testid="browse-comment" style="font-size: 0.9em; margin-top: 0.2em">'
                   f'<b>Comment:</b> {html.escape(str(r.comment))}</div>' if r.comment else "")
        st.html(
            f'<div style="margin: 0.8em 0 0.2em; font-weight: 600">{html.escape(head)}</div>'
            f'<div style="white-space: pre-wrap; font-size: 0.9em; border-left: 3px solid #ddd; '
            f'padding-left: 0.8em; max-height: 28em; overflow-y: auto">{body}</div>' + comment
        )


def _merged_queries(chosen: str, queries, labels: int) -> list[str] | None:
    """Whose merged grades the page shows: the chosen query's; for "All queries", every query's
    (None) while the project holds at most :data:`SHOWN_LABELS` labels the user may see, else the
    first :data:`MERGED_QUERIES` queries with a label (the rule then reads only their labels)."""
    if chosen != ALL:
        return [chosen]
    if labels <= SHOWN_LABELS:
        return None
    return queries.loc[queries["labels"] > 0, "query_id"].head(MERGED_QUERIES).astype(str).tolist()


def _merged(query_ids: list[str] | None) -> None:
    """The grade of each pair under the merge policy, the policy stated first, for ``query_ids``
    (None: every query)."""

    st.subheader("Grade per pair (merge policy)")
    if not access.allowed(access.current_actor(), "see_all_labels"):
        st.caption("The merged grades combine everyone's labels, so they are shown to leads and viewers.")
        return
    try:
        with context.project() as db:
            qrels = pair_grades(db, query_ids=query_ids)
            titles = document_titles(db, qrels.table["item_id"].unique().tolist())
    except WorkbenchError as exc:
        context.error(exc)
        return
    st.caption("The grade each labelled pair has in the qrels that exports, pool statistics and evaluations "
               "use: the first source in the policy's order that labelled the pair decides.")
    if query_ids is not None and len(query_ids) > 1:
        st.caption(f"Shown for the first {len(query_ids):,} queries with labels; choose a query to see its own.")
    statement = qrels.statement()
    context.escaped(statement[0].upper() + statement[1:] + ".", css="font-size: 0.9em;")
    for note in qrels.notes:
        st.warning(context.plain(qrels_note(note)))
    if qrels.table.empty:
        st.info("No pair has a grade under the merge policy yet.")
        return
    st.dataframe(
        [{"query": r.query_id, "document": r.item_id, "title": cell(titles.get(r.item_id)), "grade": int(r.grade),
          "decided by": TIER_WORDS.get(r.tier, r.tier), "assessors": int(r.assessors)}
         for r in qrels.table.itertuples(index=False)],
        hide_index=True, width="stretch", key="browse_merged")

