"""What a verification pass costs on GitHub, case by case: the requests each ladder path
sends (counted on a fake GitHub, ``responses``), and that the answers are the ones the
same history gives read from a local git repository.

The floor of a pass is the ref, the tree, and each changed cited file. The old version
of a file (its blob) and the old tree are read only when the ladder needs their
evidence: not when the anchor's definition is unchanged around the cited lines, and
not to list what changed when ``compare`` (asked for renames anyway) says it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import responses

from tests.github_payloads import FakeGitHub
from tests.gitrepo import GitRepo
from verified_memory.anchors.fingerprint import fingerprint_lines
from verified_memory.anchors.treesitter import anchor_for
from verified_memory.models import Citation, CitationCheck
from verified_memory.sources.base import CodeSource, git_blob_sha
from verified_memory.sources.github import GitHubSource
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.verify.anchored import AnchorLocator
from verified_memory.verify.ladder import Verifier

REPO = "octo/requests"
TOKEN = "ghp_RequestCountTokenNeverPrinted0123456789"

APP = '''"""The app."""


def parse(text):
    words = text.split()
    cleaned = [w.strip(".,") for w in words]
    return [w for w in cleaned if w]


def render(items):
    header = "items:"
    body = "\\n".join(f"- {item}" for item in items)
    return header + "\\n" + body


def save(path, items):
    with open(path, "w") as out:
        out.write(render(items))
'''
PARSE = (5, 7)  # lines inside parse
RENDER = (11, 13)  # lines inside render
RENDER_DEF = '''def render(items):
    header = "items:"
    body = "\\n".join(f"- {item}" for item in items)
    return header + "\\n" + body
'''


@dataclass
class Pass:
    """One pass over the same citations, on GitHub and on a local clone of the same
    history: the answers of each, the requests GitHub got, the blobs it was asked for."""

    github: list[tuple[str, str | None]]
    local: list[tuple[str, str | None]]
    calls: Counter[str]
    blobs_read: set[str]


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


def _cite(files: Mapping[str, str], path: str, lines: tuple[int, int],
          commit: str) -> Citation:
    text = files[path]
    blob = git_blob_sha(text.encode())
    start, end = lines
    return Citation(path, start, end, commit, blob, fingerprint_lines(
        text.splitlines(keepends=True), start, end,
        anchor=anchor_for(path, text, start, end, key=blob)))


def _answers(source: CodeSource, citations: list[Citation],
             revision: str) -> list[tuple[str, str | None]]:
    checks: list[CitationCheck] = Verifier(source, locator=AnchorLocator()).check(
        citations, revision)
    return [(c.outcome.value, str(c.location) if c.location else None) for c in checks]


def run_pass(tmp_path: Path, rsps: responses.RequestsMock, before: Mapping[str, str],
             after: Mapping[str, str], cited: list[tuple[str, tuple[int, int]]]) -> Pass:
    fake = FakeGitHub(REPO)
    old = fake.commit(before)
    fake.commit(after)
    fake.install(rsps)
    with GitHubSource(REPO, TOKEN, cache_dir=tmp_path / "cache", sleep=lambda s: None) as gh:
        fake.calls.clear()
        calls_before = len(rsps.calls)
        github = _answers(gh, [_cite(before, p, lines, old) for p, lines in cited],
                          gh.resolve("main"))
        blobs_read = {str(call.request.url).rsplit("/", 1)[-1].split("?")[0]
                      for call in list(rsps.calls)[calls_before:]
                      if "/git/blobs/" in str(call.request.url)}
    repo = GitRepo.project(tmp_path / "local", before)
    local_old = repo.head
    for path in set(before) - set(after):
        repo.remove(path)
    for path, text in after.items():
        repo.write(path, text)
    head = repo.commit("after")
    with LocalGitSource(repo.path) as local_source:
        local = _answers(local_source, [_cite(before, p, lines, local_old)
                                        for p, lines in cited], head)
    return Pass(github, local, Counter(fake.calls), blobs_read)


def _blob(text: str) -> str:
    return git_blob_sha(text.encode())


def test_code_moved_down_its_file_reads_only_the_new_file(
        rsps: responses.RequestsMock, tmp_path: Path) -> None:
    after = {"app.py": "import sys\nimport os\n" + APP}
    run = run_pass(tmp_path, rsps, {"app.py": APP}, after, [("app.py", RENDER)])
    assert run.github == run.local == [("relocated", "app.py:13-15")]
    # ref, tree, the changed file; its old version is not needed: the anchor's
    # definition is unchanged around the lines found
    assert run.calls == Counter(ref=1, tree=1, blob=1)
    assert run.blobs_read == {_blob(after["app.py"])}


def test_lines_in_place_in_a_changed_file_read_only_the_new_file(
        rsps: responses.RequestsMock, tmp_path: Path) -> None:
    after = {"app.py": APP.replace('"w"', '"a"')}  # save edited, parse untouched
    run = run_pass(tmp_path, rsps, {"app.py": APP}, after, [("app.py", PARSE)])
    assert run.github == run.local == [("valid", "app.py:5-7")]
    assert run.calls == Counter(ref=1, tree=1, blob=1)


def test_an_edited_definition_still_reads_the_old_file_for_evidence(
        rsps: responses.RequestsMock, tmp_path: Path) -> None:
    # render's last line edited, below the cited lines: they are still in place, but
    # the definition around them changed, so the old file decides whether the copy at
    # the cited place is the cited code
    edited = APP.replace('    return header + "\\n" + body\n',
                         '    return header + "\\n" + body + "\\n"\n')
    run = run_pass(tmp_path, rsps, {"app.py": APP}, {"app.py": edited},
                   [("app.py", (RENDER[0], RENDER[1] - 1))])
    assert run.github == run.local == [("valid", "app.py:11-12")]
    assert run.calls == Counter(ref=1, tree=1, blob=2)
    assert run.blobs_read == {_blob(APP), _blob(edited)}


def test_a_renamed_file_costs_one_compare_and_no_old_tree(
        rsps: responses.RequestsMock, tmp_path: Path) -> None:
    before = {"app.py": APP, "README.md": "# app\n"}
    after = {"core/app.py": APP, "README.md": "# app\n"}
    run = run_pass(tmp_path, rsps, before, after, [("app.py", RENDER), ("app.py", PARSE)])
    assert run.github == run.local == [("relocated", "core/app.py:11-13"),
                                       ("relocated", "core/app.py:5-7")]
    # the changed files come from the compare that names the rename: the tree at the
    # citations' commit is never listed
    assert run.calls == Counter(ref=1, tree=1, compare=1, blob=1)


def test_code_moved_to_another_file_searches_only_files_of_its_language(
        rsps: responses.RequestsMock, tmp_path: Path) -> None:
    readme = "# app\n\nRendering:\n\n```python\n" + RENDER_DEF + "```\n"
    before = {"app.py": APP, "README.md": "# app\n", "notes.txt": "n\n",
              "data.json": "{}\n"}
    after = {"app.py": APP.replace(RENDER_DEF + "\n\n", ""),
             "view.py": '"""Views."""\n\n\n' + RENDER_DEF,
             # the same lines in changed files of other kinds: never read
             "README.md": readme, "notes.txt": RENDER_DEF, "data.json": '{"a": 1}\n'}
    run = run_pass(tmp_path, rsps, before, after, [("app.py", RENDER)])
    assert run.github == run.local == [("relocated", "view.py:5-7")]
    assert not run.blobs_read & {_blob(readme), _blob(RENDER_DEF), _blob('{"a": 1}\n')}
    assert _blob(after["view.py"]) in run.blobs_read
    # compare listed the changed files; the tree at the citations' commit is still read
    # once, to tell that view.py is new there (a copy that was there all along would be
    # other code)
    assert run.calls == Counter(ref=1, tree=2, compare=1, blob=run.calls["blob"])


def test_changed_paths_only_from_a_compare_whose_base_is_an_ancestor(
        rsps: responses.RequestsMock, tmp_path: Path) -> None:
    fake = FakeGitHub(REPO)
    first = fake.commit({"app.py": APP})
    branch = fake.commit({"app.py": APP, "extra.py": "x = 1\n"}, branch="feature")
    tip = fake.commit({"app.py": "import os\n" + APP})
    fake.install(rsps)
    with GitHubSource(REPO, TOKEN, cache_dir=tmp_path / "cache", sleep=lambda s: None) as gh:
        assert gh.changed_paths(first, tip) == ("app.py",)
        # the branch diverged from main: compare lists the changes since the merge
        # base, not since the branch's commit, so the caller diffs the trees instead
        assert gh.changed_paths(branch, tip) is None
    with GitHubSource(REPO, TOKEN, cache_dir=tmp_path / "cache", sleep=lambda s: None) as gh:
        assert gh.changed_paths(first, tip) == ("app.py",)  # from the disk cache
        assert gh.requests == 0
