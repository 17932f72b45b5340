"""English stop words: the one list the package drops from text before matching words.

The offline judge's tokens (:mod:`workbench.core.judging.offline`, whose fingerprint lists
these words, so a change here is a new judge configuration), the content words of synthetic
queries (:mod:`workbench.core.synthetic_queries`) and the query terms the Label page marks all
leave these out. Lower case; tokens are ``[a-z0-9]+`` runs, so contractions appear split
(``doesn``, ``isn``).
"""

from __future__ import annotations

STOPWORDS = frozenset({
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
    "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below", "between",
    "both", "but", "by", "can", "cannot", "could", "did", "didn", "do", "does", "doesn", "doing",
    "don", "down", "during", "each", "either", "else", "ever", "every", "few", "for", "from",
    "further", "get", "gets", "getting", "got", "had", "has", "have", "having", "he", "her",
    "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "isn", "it", "its",
    "itself", "just", "let", "may", "me", "might", "more", "most", "must", "my", "need", "needs",
    "no", "nor", "not", "now", "of", "off", "on", "once", "one", "only", "or", "other", "our",
    "ours", "out", "over", "own", "per", "same", "shall", "she", "should", "so", "some", "such",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those",
    "through", "to", "too", "under", "until", "up", "upon", "us", "very", "via", "was", "we",
    "were", "what", "when", "where", "whether", "which", "while", "who", "whom", "whose", "why",
    "will", "with", "within", "without", "would", "yes", "yet", "you", "your", "yours",
})
