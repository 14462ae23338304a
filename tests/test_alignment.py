"""Line evidence asked of an old file without hashing it whole: ``occurs_once`` tries
the squeezed text first, ``same_context`` hashes only the neighbours it compares; both
answer as the file's hashes would."""

from __future__ import annotations

import random

from verified_memory.models import Location
from verified_memory.verify.alignment import occurs_once, same_context
from verified_memory.verify.files import FileText
from verified_memory.verify.ladder import find_runs

OLD = "def a():\n    x = 1\n    return x\n\n\ndef b():\n    y = 2\n    return y\n"


def fresh(text: str) -> FileText:
    return FileText("0" * 40, text)


def hashed(text: str) -> FileText:
    file = fresh(text)
    assert file.hashes
    return file


def test_rows_found_once_in_the_squeezed_text_leave_the_file_unhashed() -> None:
    old = fresh(OLD)
    assert occurs_once(old, (1, 2))
    assert old.hashes_made() is None
    assert occurs_once(hashed(OLD), (1, 2))


def test_rows_found_twice_are_counted_by_their_hashes() -> None:
    twins = "def a():\n    return 1\n\ndef b():\n    return 1\n"
    old = fresh(twins)
    assert not occurs_once(old, (1, 1))
    assert old.hashes_made() is not None
    # found twice in the squeezed text (commas and spaces are squeezed out), once by
    # the hashes (commas count there)
    alike = fresh("f(a, b)\nf(ab)\n")
    assert occurs_once(alike, (0, 0))
    assert alike.hashes_made() is not None
    # copies that overlap are two
    assert not occurs_once(fresh("a\na\na\n"), (0, 1))


def test_rows_that_start_with_a_row_of_commas_are_counted_by_their_hashes() -> None:
    """A row of commas squeezes to nothing, so two runs could start at one place of the
    squeezed text: the squeezed test does not answer for such rows."""
    old = fresh(",\nx = 1\n")
    assert occurs_once(old, (0, 1))
    assert old.hashes_made() is not None


def test_a_fingerprint_that_is_not_the_rows_own_is_looked_for_by_its_hashes() -> None:
    old = fresh(OLD)
    assert not occurs_once(old, (1, 2), (123, 456))  # found nowhere: not once
    assert old.hashes_made() is not None
    assert occurs_once(fresh(OLD), (1, 2), hashed(OLD).hashes[1:3])


def test_the_squeezed_test_answers_as_the_hashes_do() -> None:
    """Every range of random files of few distinct lines (blank ones, commas alone,
    lines told apart by commas or spaces only): the same answer either way."""
    pool = ["", "    ", ",", "x", "x,", "f(a, b)", "f(ab)", "  f(a,b)", "}", "return x"]
    rng = random.Random(13)
    for _ in range(300):
        text = "\n".join(rng.choice(pool) for _ in range(rng.randint(1, 12))) + "\n"
        whole = hashed(text)
        for first in range(len(whole.lines)):
            if not whole.lines[first].strip():
                continue  # a citation starts on a line of code (edges trimmed)
            for last in range(first, len(whole.lines)):
                by_hashes = len(find_runs(whole, whole.hashes[first:last + 1])) == 1
                assert occurs_once(fresh(text), (first, last)) == by_hashes, (text, first, last)


def test_the_neighbours_of_an_unhashed_file_are_hashed_alone() -> None:
    new = hashed("\n" + OLD)  # a blank line added above: the same neighbours
    old = fresh(OLD)
    assert same_context(old, (1, 2), new, Location("m.py", 3, 4))
    assert old.hashes_made() is None
    renamed = hashed("\n" + OLD.replace("def a():", "def c():"))
    assert not same_context(fresh(OLD), (1, 2), renamed, Location("m.py", 3, 4))
    below = hashed("\n" + OLD.replace("def b():", "def d():"))
    assert not same_context(fresh(OLD), (1, 2), below, Location("m.py", 3, 4))
