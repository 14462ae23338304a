"""The verification ladder on real git histories: every outcome, every step."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from verified_memory.anchors.fingerprint import fingerprint_lines
from verified_memory.anchors.hashing import BLANK, hash_line
from verified_memory.errors import SourceUnavailable
from verified_memory.models import Citation, Decision, Location, Outcome
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.verify.decision import decide
from verified_memory.verify.files import FileText
from verified_memory.verify.ladder import Verifier

BODY = """\
import os


def load(path):
    with open(path) as fh:
        data = fh.read()
    return data.strip()


def save(path, data):
    with open(path, "w") as fh:
        fh.write(data)
"""


def cite(repo: GitRepo, source: LocalGitSource, path: str, start: int, end: int) -> Citation:
    """A citation fingerprinted at HEAD, as the service would make it."""
    commit = source.resolve("HEAD")
    blob = source.tree(commit)[path]
    lines = source.read_blob(blob).decode().splitlines()
    return Citation(path, start, end, commit, blob, fingerprint_lines(lines, start, end))


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    repo.write("app/io.py", BODY)
    repo.write("README.md", "# demo\n")
    repo.commit("initial")
    return repo


@pytest.fixture
def source(repo: GitRepo) -> LocalGitSource:
    with LocalGitSource(repo.path) as src:
        yield src


def check(source: LocalGitSource, citation: Citation) -> tuple[Outcome, Location | None, int]:
    verifier = Verifier(source)
    (result,) = verifier.check([citation], source.resolve("HEAD"))
    return result.outcome, result.location, result.step


def test_unchanged_file_is_valid_without_reading(repo: GitRepo, source: LocalGitSource,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    c = cite(repo, source, "app/io.py", 4, 7)
    repo.write("README.md", "# demo, edited\n")
    repo.commit("unrelated")
    reads: list[str] = []
    real = source.read_blob
    monkeypatch.setattr(source, "read_blob", lambda sha: reads.append(sha) or real(sha))
    assert check(source, c) == (Outcome.VALID, Location("app/io.py", 4, 7), 1)
    assert reads == []  # step 1: equal blob shas, no content read


def test_edit_elsewhere_in_file_keeps_same_place_valid(repo: GitRepo,
                                                       source: LocalGitSource) -> None:
    c = cite(repo, source, "app/io.py", 4, 7)
    repo.write("app/io.py", BODY.replace('fh.write(data)', 'fh.write(data + "\\n")'))
    repo.commit("edit save")
    assert check(source, c) == (Outcome.VALID, Location("app/io.py", 4, 7), 2)


def test_code_that_stayed_in_place_is_told_without_hashing_either_file_whole(
        repo: GitRepo, source: LocalGitSource) -> None:
    """Step 2 hashes the cited rows of the new file alone, and asks both files whether
    the rows occur once there by their squeezed text; a twin block in the new file
    is counted by its hashes (and makes the answer the anchored locator's)."""
    from verified_memory.anchors.treesitter import DefinitionIndex
    from verified_memory.verify.anchored import AnchorLocator

    c = cite(repo, source, "app/io.py", 5, 7)
    old_blob = c.blob_sha
    assert old_blob is not None
    repo.write("app/io.py", BODY.replace('fh.write(data)', 'fh.write(data + "\\n")'))
    repo.commit("edit save")
    head = source.resolve("HEAD")
    for locator in (None, AnchorLocator(DefinitionIndex(), derive_anchors=True)):
        verifier = Verifier(source, locator=locator)
        (result,) = verifier.check([c], head)
        assert (result.outcome, result.location, result.step) == (
            Outcome.VALID, Location("app/io.py", 5, 7), 2)
        new = verifier.files.get(source.tree(head)["app/io.py"])
        assert new is not None
        assert new.hashes_made() is None
        old = verifier.files.get(old_blob)
        assert old is not None
        assert old.hashes_made() is None
    twice = BODY + "\n\n" + BODY.replace("def load", "def load_again").split("\n\n\n")[1]
    repo.write("app/io.py", twice)
    head = repo.commit("a twin of load's body")
    verifier = Verifier(source, locator=AnchorLocator(DefinitionIndex(), derive_anchors=True))
    (result,) = verifier.check([c], head)
    assert (result.outcome, result.location) == (Outcome.VALID, Location("app/io.py", 5, 7))
    new = verifier.files.get(source.tree(head)["app/io.py"])
    assert new is not None
    assert new.hashes_made() is not None


def test_whitespace_only_change_is_not_a_change(repo: GitRepo, source: LocalGitSource) -> None:
    c = cite(repo, source, "app/io.py", 4, 7)
    repo.write("app/io.py", BODY.replace("    return data.strip()", "    return  data.strip()   ")
               .replace("\n", "\r\n"))
    repo.commit("reformat")
    assert check(source, c)[:2] == (Outcome.VALID, Location("app/io.py", 4, 7))


def test_lines_inserted_above_relocate(repo: GitRepo, source: LocalGitSource) -> None:
    c = cite(repo, source, "app/io.py", 4, 7)
    repo.write("app/io.py", "# header\n# more\n" + BODY)
    repo.commit("header")
    assert check(source, c) == (Outcome.RELOCATED, Location("app/io.py", 6, 9), 3)


def test_function_moved_below_relocates(repo: GitRepo, source: LocalGitSource) -> None:
    c = cite(repo, source, "app/io.py", 4, 7)
    load, save = BODY.split("\n\n\n")[1], BODY.split("\n\n\n")[2]
    repo.write("app/io.py", f"import os\n\n\n{save}\n\n{load}\n")
    repo.commit("reorder")
    outcome, place, _ = check(source, c)
    assert outcome is Outcome.RELOCATED
    assert place is not None
    new_lines = (repo.path / "app/io.py").read_text().splitlines()
    assert new_lines[place.line_start - 1] == "def load(path):"
    assert new_lines[place.line_end - 1] == "    return data.strip()"


def test_blank_line_inside_the_range_relocates_with_the_range_grown(
        repo: GitRepo, source: LocalGitSource) -> None:
    c = cite(repo, source, "app/io.py", 4, 7)
    repo.write("app/io.py", BODY.replace("        data = fh.read()\n",
                                         "        data = fh.read()\n\n"))
    repo.commit("blank line")
    assert check(source, c)[:2] == (Outcome.RELOCATED, Location("app/io.py", 4, 8))


def test_body_edit_is_changed_with_similarity(repo: GitRepo, source: LocalGitSource) -> None:
    c = cite(repo, source, "app/io.py", 4, 7)
    repo.write("app/io.py", BODY.replace("return data.strip()", "return data"))
    repo.commit("edit load")
    verifier = Verifier(source)
    (result,) = verifier.check([c], source.resolve("HEAD"))
    assert result.outcome is Outcome.CHANGED
    assert result.similarity == pytest.approx(0.75)
    assert result.location == Location("app/io.py", 4, 7)


def test_code_deleted_is_missing(repo: GitRepo, source: LocalGitSource) -> None:
    c = cite(repo, source, "app/io.py", 4, 7)
    repo.write("app/io.py", "import os\n\n\ndef other():\n    pass\n")
    repo.commit("rewrite")
    assert check(source, c)[0] is Outcome.MISSING


def test_file_deleted_is_missing(repo: GitRepo, source: LocalGitSource) -> None:
    c = cite(repo, source, "app/io.py", 4, 7)
    repo.remove("app/io.py")
    repo.commit("delete")
    outcome, place, step = check(source, c)
    assert (outcome, place, step) == (Outcome.MISSING, None, 5)


def test_file_turned_binary_is_missing(repo: GitRepo, source: LocalGitSource) -> None:
    c = cite(repo, source, "app/io.py", 4, 7)
    repo.write("app/io.py", b"\x00\x01binary")
    repo.commit("binary")
    assert check(source, c)[0] is Outcome.MISSING


def test_duplicate_snippet_takes_nearest_and_reports_ambiguity(
        repo: GitRepo, source: LocalGitSource) -> None:
    c = cite(repo, source, "app/io.py", 11, 12)  # with open(path, "w") ... fh.write(data)
    load, save = BODY.split("\n\n\n")[1], BODY.split("\n\n\n")[2]
    repo.write("app/io.py", f"import os\n\n\n{save}\n{load}\n\n{save}")
    repo.commit("duplicate")
    (result,) = Verifier(source).check([c], source.resolve("HEAD"))
    assert result.outcome is Outcome.RELOCATED
    assert result.ambiguous
    # the two occurrences start at lines 5 and 14; 14 is nearer the old line 11
    assert result.location == Location("app/io.py", 14, 15)


def test_source_failure_is_unverifiable_never_a_verdict(repo: GitRepo,
                                                        source: LocalGitSource,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    c = cite(repo, source, "app/io.py", 4, 7)
    repo.write("app/io.py", "# header\n" + BODY)
    repo.commit("header")

    def broken(sha: str) -> bytes:
        raise SourceUnavailable("git died")

    monkeypatch.setattr(source, "read_blob", broken)
    (result,) = Verifier(source).check([c], source.resolve("HEAD"))
    assert result.outcome is Outcome.UNVERIFIABLE
    assert "git died" in result.detail
    assert decide([result]) == (Decision.UNVERIFIED, f"{c.location} unverifiable "
                                f"({result.detail})")


def test_each_blob_is_read_once_per_run(repo: GitRepo, source: LocalGitSource,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    citations = [cite(repo, source, "app/io.py", s, e) for s, e in [(4, 7), (10, 12), (1, 1)]]
    repo.write("app/io.py", "# header\n" + BODY)
    repo.commit("header")
    reads: list[str] = []
    real = source.read_blob
    monkeypatch.setattr(source, "read_blob", lambda sha: reads.append(sha) or real(sha))
    results = Verifier(source).check(citations, source.resolve("HEAD"))
    assert [r.outcome for r in results] == [Outcome.RELOCATED] * 3
    assert len(reads) == 1


def test_decision_names_broken_citations_and_verdict_beats_unreadable(
        repo: GitRepo, source: LocalGitSource) -> None:
    ok = cite(repo, source, "app/io.py", 10, 12)
    gone = cite(repo, source, "app/io.py", 4, 7)
    repo.write("app/io.py", BODY.split("\n\n\n")[0] + "\n\n\n" + BODY.split("\n\n\n")[2])
    repo.commit("drop load")
    checks = Verifier(source).check([ok, gone], source.resolve("HEAD"))
    assert [c.outcome for c in checks] == [Outcome.RELOCATED, Outcome.MISSING]
    decision, reason = decide(checks)
    assert decision is Decision.INVALIDATE
    assert reason is not None
    assert "app/io.py:4-7 missing" in reason
    assert "10-12" not in reason


def test_positions_lists_every_line_of_a_hash_in_order() -> None:
    text = "x = 1\n\ny = 2\nx = 1\n}\nz = 3\n}\nx = 1\n"
    file = FileText.from_bytes("blob", text.encode())
    assert file is not None
    for line in ("x = 1", "y = 2", "}", "z = 3"):
        expected = [i for i, other in enumerate(file.lines) if other == line]
        assert list(file.positions(hash_line(line))) == expected
        assert list(file.positions(hash_line(line))) == expected  # the second time: kept
    assert list(file.positions(BLANK)) == []  # blank lines are never looked for
    assert list(file.positions(hash_line("absent"))) == []


def test_mentions_answers_whether_a_word_is_in_the_text() -> None:
    file = FileText.from_bytes("blob", b"def fetch(url):\n    return get(url)\n")
    assert file is not None
    assert file.mentions("fetch")
    assert file.mentions("get")
    assert not file.mentions("retry")
    assert not file.mentions("retry")  # the kept answer, the same
    assert file.mentions("fetch")


def test_mentions_answers_as_the_text_once_the_file_is_squeezed() -> None:
    """Once a file's squeezed text is made, a word is first looked for there; it holds
    every word the text holds, and words the text does not (two words a space apart,
    run together): those, and words with a space or comma, are looked for in the text."""
    text = b"int count = total ,\n    items;\nreturn count;\n"
    for word in ("count", "total", "intcount", "total,items", "int count", "items", "absent"):
        plain, squeezed = (FileText.from_bytes("blob", text) for _ in range(2))
        assert plain is not None
        assert squeezed is not None
        squeezed.squeezed()
        assert squeezed.mentions(word) == plain.mentions(word) == (word in text.decode()), word
    file = FileText.from_bytes("blob", text)
    assert file is not None
    assert "intcount" in file.squeezed()
    assert not file.mentions("intcount")  # in the squeezed text only


def test_names_answers_whether_a_word_is_a_whole_word_of_the_text() -> None:
    file = FileText.from_bytes("blob", "def run_e(rt):\n    return Runtime($run, _Run, café)\n"
                                       .encode())
    assert file is not None
    assert file.names("run_e")
    assert file.names("run")  # after "$", which is no word character
    assert file.names("_Run")
    assert file.names("café")
    assert file.mentions("Run")
    assert not file.names("Run")  # only inside "Runtime" and "_Run"
    assert not file.names("caf")
    assert not file.names("absent")
    assert not file.names("Run")  # the kept answer, the same


def test_names_is_the_whole_word_regular_expression() -> None:
    """``names`` finds words with ``str.find``, not ``re``: the same answers, on texts
    of word characters, non-ASCII letters and digits, separators and line breaks."""
    rng = random.Random(13)
    alphabet = "ab_1 .-\n\u00e9\u00b2\u0660\u2028$"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(14)))
        word = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 4)))
        file = FileText.from_bytes("blob", text.encode())
        assert file is not None
        expected = re.search(rf"(?<!\w){re.escape(word)}(?!\w)", file.text) is not None
        assert file.names(word) is expected, (text, word)


def test_foreign_rows_align_only_when_a_row_could_be_one() -> None:
    """Rows the alignment keeps from old lines other than the cited ones: a row whose
    line the old file has nowhere but in the cited rows is ruled out without aligning;
    one that could be foreign aligns the files once, and the answer is the
    alignment's."""
    from verified_memory.verify.origins import ForeignRows, Origins, _Base

    old = FileText.from_bytes("old", b"a = 1\nb = 2\nc = 3\nreturn\n")
    new = FileText.from_bytes("new", b"b = 2\nx = 9\n\nc = 3\nreturn\n")
    assert old is not None
    assert new is not None
    origins = Origins()
    aligned: list[int] = []
    real = origins._origins_of
    origins._origins_of = lambda o, n: aligned.append(1) or real(o, n)  # type: ignore[method-assign]
    rows = origins._foreign_rows(_Base(old, (1, 2)), new)  # b = 2 and c = 3 were cited
    assert 0 not in rows  # b = 2: only ever in the cited rows
    assert 1 not in rows  # x = 9: not in the old file
    assert 2 not in rows  # blank
    assert 3 not in rows  # c = 3: cited
    assert aligned == []
    assert 4 in rows  # return: kept from old row 3, which was not cited
    assert aligned == [1]
    assert 0 not in rows
    with_siblings = origins._foreign_rows(_Base(old, (1, 2)), new) | frozenset({1})
    assert 1 in with_siblings
    assert 4 in with_siblings
    assert aligned == [1]  # the alignment is kept per pair of blobs
    assert 0 not in ForeignRows.none()
    assert 0 in ForeignRows.none() | frozenset({0})


def test_prefetch_is_only_a_warm_up(tmp_path: Path) -> None:
    from verified_memory.sources import DictSource
    from verified_memory.verify.files import FileCache

    plain = FileCache(DictSource({"r": {"a.py": "x = 1\n"}}))
    plain.prefetch(["0" * 40])  # a source that cannot batch: nothing happens

    class Broken(DictSource):
        def read_blobs(self, blob_shas: object) -> None:
            raise SourceUnavailable("git is gone")

    broken = FileCache(Broken({"r": {"a.py": "x = 1\n"}}))
    broken.prefetch(["0" * 40])  # the failure is left for get() to meet


def test_a_bulk_check_reads_both_sides_of_changed_files_together(tmp_path: Path) -> None:
    from verified_memory.verify.bulk import check_citations

    repo = GitRepo(tmp_path / "r")
    for n in range(3):
        repo.write(f"m{n}.py", f"def f{n}():\n    return {n}\n")
    repo.commit("one")
    first = repo.run("rev-parse", "HEAD")
    for n in range(3):
        repo.write(f"m{n}.py", f"import os\n\n\ndef f{n}():\n    return {n}\n")
    repo.commit("two")
    items = [(n, {"path": f"m{n}.py", "line_start": 1, "line_end": 2, "sha": first})
             for n in range(3)]
    with LocalGitSource(repo.path) as source:
        batches: list[list[str]] = []
        real = source.read_blobs
        source.read_blobs = lambda shas: batches.append(list(shas)) or real(shas)  # type: ignore[method-assign]
        got = [r.to_dict() for r in check_citations(source, items, "HEAD")]
        old, new = source.tree(first), source.tree("HEAD")
    assert [r["status"] for r in got] == ["relocated"] * 3
    # the first exchange holds all six files: each cited file as it was and as it is
    assert sorted(batches[0]) == sorted([old[f"m{n}.py"] for n in range(3)]
                                        + [new[f"m{n}.py"] for n in range(3)])


def test_reading_ahead_lists_no_cited_commit(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Citations of 20 commits (more than the trees a source keeps): each commit is asked
    about one path, found through its tree objects; none is listed (``git ls-tree``),
    and no tree is listed twice."""
    from verified_memory.verify.bulk import check_citations

    repo = GitRepo(tmp_path / "r")
    shas = []
    for n in range(20):
        repo.write("m.py", "".join(f"X{k} = {k}\n" for k in range(n + 1)))
        repo.commit(f"c{n}")
        shas.append(repo.run("rev-parse", "HEAD"))
    repo.write("m.py", "import os\n" + "".join(f"X{k} = {k}\n" for k in range(20)))
    repo.commit("last")
    items = [(n, {"path": "m.py", "line_start": 1, "line_end": 1, "sha": sha})
             for n, sha in enumerate(shas)]
    listed: list[str] = []
    real = LocalGitSource._ls_tree
    monkeypatch.setattr(LocalGitSource, "_ls_tree",
                        lambda self, commit: listed.append(commit) or real(self, commit))
    with LocalGitSource(repo.path) as source:
        got = [r.to_dict() for r in check_citations(source, items, "HEAD")]
    assert [r["status"] for r in got] == ["relocated"] * 20
    assert not set(listed) & set(shas)
    assert len(listed) == len(set(listed))
