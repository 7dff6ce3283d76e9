"""Word tokenisation for IMDB reviews, in the manner of the Keras IMDB data the k-tied paper used.

Ids: 0 padding, 1 start of review, 2 out of vocabulary, 3.. words by decreasing training-set
frequency (ties broken alphabetically), so that `vocab_size` keeps the `vocab_size - 3` most frequent
words. Sequences get the start id, are truncated to their last `maxlen` ids and pre-padded with 0
(Keras `pad_sequences` defaults).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np

from base.errors import InputError

PAD, START, OOV = 0, 1, 2
FIRST_WORD_ID = 3
_WORD = re.compile(r"[a-z0-9']+")


def tokenise(text: str | bytes) -> list[str]:
    """Lower-cased words of a review; HTML line breaks ("<br />") count as spaces."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return _WORD.findall(text.lower().replace("<br />", " "))


def build_vocabulary(texts: Iterable[str | bytes], vocab_size: int) -> dict[str, int]:
    """{word: id} for the vocab_size - 3 most frequent words of `texts`, ids 3 .. vocab_size - 1."""
    if vocab_size <= FIRST_WORD_ID:
        raise InputError("vocab_size", vocab_size, f"an integer > {FIRST_WORD_ID} (ids 0-2 are reserved)")
    counts = Counter(word for text in texts for word in tokenise(text))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return {word: FIRST_WORD_ID + rank
            for rank, (word, _) in enumerate(ranked[:vocab_size - FIRST_WORD_ID])}


def encode(texts: Iterable[str | bytes], vocabulary: Mapping[str, int], maxlen: int) -> np.ndarray:
    """Token ids, int32 (N, maxlen): start id + word ids, last `maxlen` kept, pre-padded with 0."""
    if maxlen < 1:
        raise InputError("maxlen", maxlen, "an integer >= 1")
    rows = []
    for text in texts:
        ids = [START] + [vocabulary.get(word, OOV) for word in tokenise(text)]
        ids = ids[-maxlen:]
        rows.append([PAD] * (maxlen - len(ids)) + ids)
    return np.asarray(rows, dtype=np.int32).reshape(len(rows), maxlen)
