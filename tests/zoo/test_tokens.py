"""IMDB tokenisation: Keras-style ids (0 pad, 1 start, 2 out of vocabulary), pre-padding."""

import numpy as np
import pytest

from zoo.data.tokens import build_vocabulary, encode, tokenise


def test_tokenise_lowercases_and_splits_html_breaks():
    assert tokenise("Great film!<br /><br />It's 10/10.") == ["great", "film", "it's", "10", "10"]
    assert tokenise(b"A b") == ["a", "b"]


def test_vocabulary_ranks_by_frequency_then_alphabet():
    vocab = build_vocabulary(["b a b", "c b a", "d"], vocab_size=6)
    assert vocab == {"b": 3, "a": 4, "c": 5}  # c and d tie at 1: alphabetical, one slot left
    with pytest.raises(ValueError, match="vocab_size"):
        build_vocabulary(["a"], vocab_size=3)


def test_encode_pre_pads_and_keeps_the_end():
    vocab = {"b": 3, "a": 4}
    x = encode(["a b", "b z a b a"], vocab, maxlen=4)
    assert x.dtype == np.int32
    np.testing.assert_array_equal(x, [[0, 1, 4, 3], [2, 4, 3, 4]])
    assert encode([], vocab, maxlen=4).shape == (0, 4)
