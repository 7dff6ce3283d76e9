"""Fixed-size shuffled minibatch indices."""

import numpy as np
import pytest

from inference.batches import minibatches


def test_shapes_drop_last_and_no_repeats():
    batches = minibatches(103, 10, seed=0)
    assert batches.shape == (10, 10) and np.issubdtype(batches.dtype, np.integer)
    flat = batches.ravel()
    assert len(np.unique(flat)) == 100 and flat.min() >= 0 and flat.max() < 103


def test_seeded_and_shuffled():
    a, b = minibatches(50, 5, seed=1), minibatches(50, 5, seed=1)
    np.testing.assert_array_equal(a, b)
    c = minibatches(50, 5, seed=2)
    assert not np.array_equal(a, c)
    assert not np.array_equal(np.sort(a.ravel()), a.ravel())  # not in order


def test_generator_gives_successive_epochs():
    rng = np.random.default_rng(4)
    first, second = minibatches(20, 5, rng), minibatches(20, 5, rng)
    np.testing.assert_array_equal(first, minibatches(20, 5, 4))
    assert not np.array_equal(first, second)


def test_exact_division_uses_every_index():
    assert sorted(minibatches(12, 4, seed=3).ravel()) == list(range(12))


@pytest.mark.parametrize("n, batch_size", [(0, 1), (5, 0), (4, 5)])
def test_bad_arguments(n, batch_size):
    with pytest.raises(ValueError, match="batch_size|n"):
        minibatches(n, batch_size, seed=0)


def test_blocks_are_drawn_as_needed_so_memory_does_not_grow_with_steps():
    """Issue 12: all of a 400k-step fit's indices at once were ~800 MB (400,000 x 128 x 8 bytes); the blocks are
    drawn one at a time, so taking a few blocks of a 400k-step run allocates about what a 1k-step run does."""
    import tracemalloc

    from inference.batches import minibatch_blocks

    def peak_bytes(steps):
        tracemalloc.start()
        blocks = minibatch_blocks(1347, 128, steps, 0, 500)
        first = [next(blocks) for _ in range(2)]
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert [b.shape for b in first] == [(500, 128), (500, 128)]
        return peak

    small, large = peak_bytes(1_000), peak_bytes(400_000)
    assert large < 2 * small + (1 << 20), (small, large)
    assert large < 8 << 20  # two blocks of 500 x 128 int32 (256 kB each) and one epoch, far below 800 MB
