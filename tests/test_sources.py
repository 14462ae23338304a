"""Code sources against real git repositories built in tmp_path (and the dict fake)."""

from __future__ import annotations

import gc
import multiprocessing
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo
from verified_memory import sources
from verified_memory.errors import NotFound, SourceUnavailable, ValidationError
from verified_memory.sources import (
    CodeSource,
    DictSource,
    LocalGitSource,
    Rename,
    WorktreeSource,
    find_working_copy,
    git_blob_sha,
    parse_remote_url,
    repo_from_remote,
)
from verified_memory.sources.base import BatchReader, Reopenable, narrowed, no_file
from verified_memory.sources.discovery import no_repo_named

symlinks = pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges")


@pytest.fixture(autouse=True)
def _no_parent_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep git from finding a repository above tmp_path (e.g. when /tmp is in one)."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", os.fspath(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    repo.write("README.md", "# demo\n")
    repo.write("src/app.py", "def main():\n    return 1\n")
    repo.write("bin/run.sh", "#!/bin/sh\necho hi\n")
    (repo.path / "bin/run.sh").chmod(0o755)
    repo.commit("first")
    repo.run("tag", "v1")
    repo.run("tag", "-a", "v1-annotated", "-m", "annotated")
    return repo


@pytest.fixture
def source(repo: GitRepo) -> Iterator[LocalGitSource]:
    with LocalGitSource(repo.path) as source:
        yield source


class PopenSpy:
    """Records every process started, so a test can count git cat-file processes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started: list[subprocess.Popen[bytes]] = []
        real = subprocess.Popen

        def spy(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
            proc: subprocess.Popen[bytes] = real(*args, **kwargs)
            self.started.append(proc)
            return proc

        monkeypatch.setattr(subprocess, "Popen", spy)

    def catfiles(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.started if "cat-file" in list(map(str, p.args))]  # type: ignore[arg-type]


# --------------------------------------------------------------------------- public API


def test_exports() -> None:
    assert sources.__all__ == sorted(sources.__all__)
    assert set(sources.__all__) == {
        "CodeSource", "DictSource", "GitHubSource", "LocalGitSource", "Rename", "WorktreeSource",
        "find_working_copy", "git_blob_sha", "parse_remote_url", "repo_from_remote",
    }
    for name in sources.__all__:
        assert getattr(sources, name) is not None


def test_importing_sources_does_not_import_optional_extras() -> None:
    code = (
        "import sys, verified_memory.sources as s; "
        "assert 'verified_memory.sources.github' not in sys.modules; "
        "assert 'github' not in sys.modules and 'tenacity' not in sys.modules; "
        "assert s.GitHubSource.__name__ == 'GitHubSource'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_source_satisfies_the_protocol(repo: GitRepo) -> None:
    with LocalGitSource(repo.path) as a, WorktreeSource(repo.path) as b:
        for source in (a, b, DictSource({"c": {}})):
            assert isinstance(source, CodeSource)


# --------------------------------------------------------------------------- resolve


def test_resolve_head_branch_tag_and_short_sha(repo: GitRepo, source: LocalGitSource) -> None:
    head = repo.head
    assert source.resolve("HEAD") == head
    assert source.resolve("main") == head
    assert source.resolve("v1") == head
    assert source.resolve("v1-annotated") == head  # annotated tags are peeled to the commit
    assert source.resolve(head[:8]) == head
    assert source.resolve(head) == head


def test_resolve_sees_a_branch_move(repo: GitRepo, source: LocalGitSource) -> None:
    first = source.resolve("HEAD")
    repo.write("new.txt", "x\n")
    second = repo.commit("second")
    assert second != first
    assert source.resolve("HEAD") == second
    assert source.resolve("HEAD~1") == first


def test_a_full_sha_is_asked_of_git_once(repo: GitRepo, source: LocalGitSource,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A full sha that named a commit names it for ever: git is asked once, and later
    the sha is taken as it is, without reading past the replies asked for ahead; a
    name, a short sha or a sha that names no commit is asked every time."""
    head = repo.head
    readme = source.tree("HEAD")["README.md"]
    asked: list[str] = []
    real = source._catfile.query
    monkeypatch.setattr(source._catfile, "query",
                        lambda name: asked.append(name) or real(name))
    assert source.resolve(head) == head
    source.read_blobs([readme])
    assert source.resolve(head) == head
    assert source.tree(head)["README.md"] == readme
    assert source._catfile._waiting == {readme}  # nothing read past it
    assert [source.resolve(ref) for ref in ("HEAD", "HEAD", head[:12])] == [head] * 3
    tree_sha = repo.run("rev-parse", "HEAD^{tree}")
    for _ in range(2):
        with pytest.raises(NotFound):
            source.resolve(tree_sha)
    assert [name.removesuffix("^{commit}") for name in asked] == [
        head, "HEAD", "HEAD", head[:12], tree_sha, tree_sha]


@pytest.mark.parametrize("ref", ["nope", "v2", "0" * 40, "HEAD:README.md"])
def test_resolve_unknown_ref(source: LocalGitSource, ref: str) -> None:
    with pytest.raises(NotFound, match="does not exist"):
        source.resolve(ref)


def test_a_blob_or_tree_sha_for_a_commit_says_what_it_names(
        repo: GitRepo, source: LocalGitSource) -> None:
    """A file's blob sha given where a commit belongs (a citation's blob_sha for its
    sha) exists: the error says what it is, not only that no commit has that name."""
    blob = repo.run("rev-parse", "HEAD:README.md")
    tree = repo.run("rev-parse", "HEAD^{tree}")
    for sha, kind in ((blob, "blob"), (tree, "tree")):
        with pytest.raises(NotFound, match=f"ref '{sha}' does not exist in .* as a commit: "
                                           f"it names a {kind}, not a commit"):
            source.resolve(sha)


@pytest.mark.parametrize("ref", ["main v1", "HEAD\nHEAD", "a\tb", "x\x00y", "-h", "--all", ""])
def test_resolve_rejects_malformed_refs(source: LocalGitSource, ref: str) -> None:
    with pytest.raises(NotFound, match="does not exist"):
        source.resolve(ref)
    assert source.resolve("HEAD")  # the pipe is still in step afterwards


def test_resolve_in_an_empty_repository(tmp_path: Path) -> None:
    empty = GitRepo(tmp_path / "empty")
    with LocalGitSource(empty.path) as source, pytest.raises(NotFound, match="'HEAD'"):
        source.resolve("HEAD")


# --------------------------------------------------------------------------- tree


def test_tree_lists_files_with_git_blob_shas(repo: GitRepo, source: LocalGitSource) -> None:
    tree = source.tree(source.resolve("HEAD"))
    assert set(tree) == {"README.md", "src/app.py", "bin/run.sh"}
    for path, sha in tree.items():
        assert sha == repo.blob(path)
    assert tree is source.tree(repo.head)  # cached per commit
    assert source.tree("HEAD") is tree  # a ref resolves to the same cached tree
    with pytest.raises(TypeError):
        tree["new"] = "x"  # type: ignore[index]  # a cached tree cannot be changed


@symlinks
def test_tree_skips_symlinks_and_submodules(repo: GitRepo, source: LocalGitSource) -> None:
    (repo.path / "link.md").symlink_to("README.md")
    repo.commit("symlink")
    repo.run("update-index", "--add", "--cacheinfo", f"160000,{repo.head},sub")
    repo.commit("submodule", add_all=False)
    listed = repo.run("ls-tree", "-r", "HEAD")
    assert "120000" in listed
    assert "160000" in listed
    assert set(source.tree("HEAD")) == {"README.md", "src/app.py", "bin/run.sh"}


def test_tree_of_unknown_revision(source: LocalGitSource) -> None:
    with pytest.raises(NotFound):
        source.tree("no-such-branch")


def test_tree_paths_with_spaces_and_unicode(repo: GitRepo, source: LocalGitSource) -> None:
    repo.write("docs/a file.md", "spaces\n")
    repo.write("docs/ünïcode.md", "unicode\n")
    repo.commit("names")
    tree = source.tree("HEAD")
    assert tree["docs/a file.md"] == repo.blob("docs/a file.md")
    assert tree["docs/ünïcode.md"] == git_blob_sha(b"unicode\n")


# --------------------------------------------------------------------------- read_blob


def test_read_blob_returns_exact_bytes(repo: GitRepo, source: LocalGitSource) -> None:
    binary = bytes(range(256)) * 4 + b"\n\n"
    crlf = b"line one\r\nline two\r\n\r\n"
    repo.write("data.bin", binary)
    repo.write("win.txt", crlf)
    repo.write("empty.txt", b"")
    repo.write("no-newline.txt", b"last line")
    repo.commit("bytes")
    tree = source.tree("HEAD")
    assert source.read_blob(tree["data.bin"]) == binary
    assert source.read_blob(tree["win.txt"]) == crlf
    assert source.read_blob(tree["empty.txt"]) == b""
    assert source.read_blob(tree["no-newline.txt"]) == b"last line"
    for path, sha in tree.items():
        assert git_blob_sha(source.read_blob(sha)) == sha, path


def test_read_blobs_reads_many_in_one_exchange(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(30):
        repo.write(f"pkg/m{n}.py", f"VALUE = {n}\n")
    repo.commit("many")
    spy = PopenSpy(monkeypatch)
    with LocalGitSource(repo.path) as source:
        head = source.resolve("HEAD")
        tree = source.tree(head)
        blobs = [tree[f"pkg/m{n}.py"] for n in range(30)]
        # a missing object and a commit in the batch are skipped, not fatal
        assert isinstance(source, BatchReader)
        source.read_blobs([*blobs, "0" * 40, head, blobs[0]])
        # now every blob comes from the cache: asking git again would fail the test
        monkeypatch.setattr(source._catfile, "query",
                            lambda name: pytest.fail(f"{name} read twice"))
        assert [source.read_blob(b) for b in blobs] == [
            f"VALUE = {n}\n".encode() for n in range(30)]
        monkeypatch.undo()
        with pytest.raises(NotFound):
            source.read_blob("0" * 40)  # still reported where it is asked for
        assert len(spy.catfiles()) == 1


def test_blobs_asked_ahead_wait_in_the_pipe_until_wanted(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``read_blobs`` asks git for the blobs and returns: each is read from the pipe when
    it is wanted (the ones asked before it on the way), a query for something else
    reads past them and keeps them, and no more than ``_BATCH`` wait at once, so git is
    never left blocked on a full pipe (here replies larger than the pipe's buffer)."""
    from verified_memory.sources import local_git

    monkeypatch.setattr(local_git, "_BATCH", 4)
    for n in range(10):
        repo.write(f"c/{n}.txt", f"{n}\n" * 400_000)  # 800 kB each
    repo.commit("chunks")
    with LocalGitSource(repo.path) as source:
        tree = source.tree("HEAD")
        blobs = [tree[f"c/{n}.txt"] for n in range(10)]
        source.read_blobs(blobs)
        assert source._catfile._waiting == set(blobs[:4])  # the first four, no more
        assert not any(b in source._blobs for b in blobs)  # nothing read yet
        assert source.read_blob(blobs[2]) == b"2\n" * 400_000
        assert [b in source._blobs for b in blobs[:4]] == [True, True, True, False]
        source.read_blobs(blobs[3:9])  # four new (of five), the one waiting read first
        assert source._catfile._waiting == set(blobs[4:8])
        assert blobs[3] in source._blobs
        assert source.resolve("HEAD") == repo.head  # reads past the rest, keeps them
        assert not source._catfile._waiting
        assert all(b in source._blobs for b in blobs[:8])
        assert [source.read_blob(b) for b in reversed(blobs)] == [
            f"{n}\n".encode() * 400_000 for n in reversed(range(10))]


def test_a_reply_asked_ahead_that_is_no_blob_is_left_for_the_read(repo: GitRepo) -> None:
    with LocalGitSource(repo.path) as source:
        source.read_blobs(["0" * 40, repo.head, repo.blob("README.md")])
        with pytest.raises(NotFound, match="is a commit"):
            source.read_blob(repo.head)
        with pytest.raises(NotFound, match="does not exist"):
            source.read_blob("0" * 40)
        assert source.read_blob(repo.blob("README.md")) == b"# demo\n"


def test_paths_looked_up_together_are_asked_for_in_one_exchange(
        repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """``prefetch_paths`` asks git for the folder of each path by name, all in one
    exchange (git walks down to them), not a round trip per level of tree objects;
    the lookups after it ask nothing more."""
    from verified_memory.sources import local_git

    for n in range(6):
        repo.write(f"a{n}/b/c/f.py", f"x = {n}\n")
    first = repo.commit("deep")
    repo.write("a0/b/c/f.py", "x = 10\n")
    second = repo.commit("edit")
    exchanges: list[int] = []
    write = local_git._CatFile._write

    def counted(stdin: Any, names: Any) -> None:
        exchanges.append(len(names))
        write(stdin, names)

    monkeypatch.setattr(local_git._CatFile, "_write", staticmethod(counted))
    with LocalGitSource(repo.path) as source:
        source.tree(first), source.tree(second)  # the commits resolved
        exchanges.clear()
        wanted = [(c, f"a{n}/b/c/f.py") for c in (first, second) for n in range(6)]
        source.prefetch_paths([*wanted, (second, "nowhere/f.py"), ("HEAD", "a0/b/c/f.py")])
        # a0/b/c .. a5/b/c at both commits, nowhere at the second, a0/b/c at HEAD
        # (the second by its sha): one exchange, each name once
        assert exchanges == [13]
        asked = len(exchanges)
        for commit, path in wanted:
            assert source.tree(commit).get(path) == repo.blob(path, commit)
        assert len(exchanges) == asked  # every lookup answered from what was read
        # a folder git did not find is walked down to (it may be there, unreadable)
        assert source.tree(second).get("nowhere/f.py") is None


@symlinks
def test_paths_asked_for_ahead_by_folder_name_answer_as_the_walk_does(
        repo: GitRepo) -> None:
    """A folder asked for by name (``<commit>:<folder>``) is the tree the walk down the
    tree objects reaches, or nothing where the walk finds nothing: a folder that is a
    link, a file, or is missing; ``.`` and ``..`` are never asked by name."""
    repo.write("pkg/mod.py", "x = 1\n")
    repo.write("pkg/sub/deep.py", "y = 2\n")
    (repo.path / "linked").symlink_to("pkg")
    head = repo.commit("a package, a link to it")
    paths = ["pkg/mod.py", "pkg/sub/deep.py", "linked/mod.py", "README.md/x.py",
             "gone/x.py", "pkg/./mod.py", "pkg/../README.md", "pkg//mod.py", "top.py",
             "README.md"]
    with LocalGitSource(repo.path) as walked:
        expected = {p: walked.tree(head).get(p) for p in paths}
    assert expected["pkg/sub/deep.py"] == repo.blob("pkg/sub/deep.py")
    assert expected["linked/mod.py"] is None
    assert expected["pkg/../README.md"] is None
    with LocalGitSource(repo.path) as source:
        source.prefetch_paths([(head, p) for p in paths])
        assert {p: source.tree(head).get(p) for p in paths} == expected


def test_read_blob_unknown_or_not_a_blob(repo: GitRepo, source: LocalGitSource) -> None:
    with pytest.raises(NotFound):
        source.read_blob("0" * 40)
    with pytest.raises(NotFound, match="not a full object id"):
        source.read_blob("HEAD:README.md")
    with pytest.raises(NotFound, match="is a commit"):
        source.read_blob(repo.head)
    assert source.read_blob(repo.blob("README.md")) == b"# demo\n"


def test_one_catfile_process_for_many_reads(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(30):
        repo.write(f"many/f{i}.txt", f"file {i}\n" * i)
    repo.commit("many")
    spy = PopenSpy(monkeypatch)
    with LocalGitSource(repo.path) as source:
        assert spy.catfiles() == []  # started lazily
        tree = source.tree(source.resolve("HEAD"))
        for _ in range(2):
            for path, sha in tree.items():
                assert git_blob_sha(source.read_blob(sha)) == sha, path
        source.resolve("main")
        source.tree(source.resolve("HEAD"))
        assert len(spy.catfiles()) == 1
        proc = spy.catfiles()[0]
        assert proc.poll() is None
    assert proc.poll() is not None  # closed with the context manager
    git_processes = [p for p in spy.started if "ls-tree" in list(map(str, p.args))]  # type: ignore[arg-type]
    assert len(git_processes) == 1  # one ls-tree per distinct commit


def test_blobs_are_read_once_then_cached(
    repo: GitRepo, source: LocalGitSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = PopenSpy(monkeypatch)
    sha = repo.blob("src/app.py")
    data = source.read_blob(sha)
    spy.catfiles()[0].kill()
    spy.catfiles()[0].wait()
    assert source.read_blob(sha) == data  # from the cache: the dead process is not asked


def test_a_killed_catfile_process_is_source_unavailable(
    repo: GitRepo, source: LocalGitSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = PopenSpy(monkeypatch)
    source.resolve("HEAD")
    proc = spy.catfiles()[0]
    proc.kill()
    proc.wait()
    with pytest.raises(SourceUnavailable, match="cat-file"):
        source.read_blob(repo.blob("README.md"))
    # The dead process was dropped: the next call starts a fresh one.
    assert source.read_blob(repo.blob("README.md")) == b"# demo\n"
    assert len(spy.catfiles()) == 2


def test_a_catfile_that_dies_with_replies_asked_ahead_is_source_unavailable(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blobs asked for ahead, then the process killed before their replies are read
    whole: the read says the source is unavailable (no hang, no half a blob), forgets
    what was asked, and the next read starts a fresh process."""
    for name in ("a", "b", "c"):
        repo.write(f"big/{name}.txt", f"{name}\n" * 1_500_000)  # 3 MB, more than the pipe
    repo.commit("big files")
    spy = PopenSpy(monkeypatch)
    with LocalGitSource(repo.path) as source:
        blobs = [repo.blob(f"big/{name}.txt") for name in ("a", "b", "c")]
        source.read_blobs(blobs)
        proc = spy.catfiles()[0]
        proc.kill()
        proc.wait()
        with pytest.raises(SourceUnavailable, match="cat-file"):
            source.read_blob(blobs[1])
        assert not source._catfile._waiting
        assert source.read_blob(blobs[2]) == b"c\n" * 1_500_000
        assert len(spy.catfiles()) == 2


def test_closing_with_replies_asked_ahead_and_unread_ends_git_at_once(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blobs asked for ahead and never read fill git's pipe: closing the source ends git
    without the 2 s wait and the kill (git, blocked writing, never saw the EOF)."""
    for name in ("a", "b", "c"):
        repo.write(f"big/{name}.txt", f"{name}\n" * 1_500_000)  # 3 MB, more than the pipe
    repo.commit("big files")
    killed: list[int] = []
    kill = subprocess.Popen.kill

    def recorded(proc: subprocess.Popen[bytes]) -> None:
        killed.append(proc.pid)
        kill(proc)

    monkeypatch.setattr(subprocess.Popen, "kill", recorded)
    spy = PopenSpy(monkeypatch)
    source = LocalGitSource(repo.path)
    source.read_blobs(repo.blob(f"big/{name}.txt") for name in ("a", "b", "c"))
    proc = spy.catfiles()[0]
    source.close()
    assert proc.poll() is not None
    assert killed == []


def test_paths_looked_up_ahead_in_a_broken_repository_fail_at_the_lookup(
        repo: GitRepo) -> None:
    """``prefetch_paths`` is a warm-up: a tree object git cannot read is left for the
    lookup, which says the source is unavailable (never that the path is not there)."""
    head = repo.head
    tree_sha = repo.run("rev-parse", "HEAD:src")
    (repo.path / ".git" / "objects" / tree_sha[:2] / tree_sha[2:]).unlink()
    with LocalGitSource(repo.path) as source:
        source.prefetch_paths([(head, "src/app.py"), (head, "README.md")])
        tree = source.tree(head)
        assert tree.get("README.md") == repo.blob("README.md")
        with pytest.raises(SourceUnavailable, match="cannot read the tree"):
            tree.get("src/app.py")


def test_close_is_idempotent_and_reopens_lazily(repo: GitRepo) -> None:
    source = LocalGitSource(repo.path)
    source.close()
    assert source.resolve("HEAD") == repo.head
    source.close()
    source.close()
    assert source.resolve("HEAD") == repo.head
    source.close()


def test_reopen_gives_a_twin_with_its_own_process(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = PopenSpy(monkeypatch)
    with LocalGitSource(repo.path) as source:
        blob = source.tree(source.resolve("HEAD"))["README.md"]
        twin = source.reopen()
        assert isinstance(twin, Reopenable)
        assert twin is not source
        assert twin.path == source.path
        assert twin.read_blob(blob) == source.read_blob(blob)
        assert len(spy.catfiles()) == 2  # one pipe each
    with twin:  # the original is closed; its twin reads on
        assert twin.tree(twin.resolve("HEAD"))["README.md"] == blob


def test_a_forgotten_source_stops_its_process(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = PopenSpy(monkeypatch)
    source = LocalGitSource(repo.path)
    source.resolve("HEAD")
    proc = spy.catfiles()[0]
    del source
    gc.collect()
    assert proc.poll() is not None  # stopped, without a ResourceWarning (warnings are errors)


def test_concurrent_reads_share_the_pipe(repo: GitRepo, source: LocalGitSource) -> None:
    for i in range(40):
        repo.write(f"t/{i}.txt", f"{i}\n" * 500)
    repo.commit("threads")
    tree = source.tree("HEAD")
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda item: (item[1], source.read_blob(item[1])), tree.items()))
    assert all(git_blob_sha(data) == sha for sha, data in results)


def test_concurrent_reads_asked_ahead_share_the_pipe(repo: GitRepo) -> None:
    """Threads that ask for blobs and trees ahead (``read_blobs``, ``prefetch_paths``)
    while others read and look paths up each get their own object, whole: replies read
    from the pipe by one thread for another are kept for it."""
    for i in range(60):
        repo.write(f"t{i % 6}/d/{i}.txt", f"{i}\n" * (200 + 40 * i))
    head = repo.commit("threads")
    paths = [f"t{i % 6}/d/{i}.txt" for i in range(60)]
    blobs = {path: repo.blob(path) for path in paths}

    def work(n: int) -> list[bool]:
        mine = paths[n::4]
        if n % 2:
            source.read_blobs(blobs[p] for p in reversed(mine))
        else:
            source.prefetch_paths((head, p) for p in mine)
        tree = source.tree(head)
        return [tree.get(p) == blobs[p] and git_blob_sha(source.read_blob(blobs[p])) == blobs[p]
                for p in mine]

    for _ in range(5):
        with LocalGitSource(repo.path) as source, ThreadPoolExecutor(max_workers=8) as pool:
            answers = [ok for found in pool.map(work, range(16)) for ok in found]
        assert len(answers) == sum(len(paths[n::4]) for n in range(16))
        assert all(answers)


# --------------------------------------------------------------------------- renames


def _git_processes(spy: PopenSpy, command: str) -> int:
    return sum(command in list(map(str, p.args)) for p in spy.started)  # type: ignore[arg-type]


@symlinks
def test_a_tree_answers_paths_without_listing_the_commit(
        repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few paths looked up at a commit are found through its tree objects, over the
    cat-file pipe: no ``git ls-tree`` process, the same answers as the listing (links,
    submodules and directories are no files), each path walked once."""
    (repo.path / "link.md").symlink_to("README.md")
    repo.write("deep/er/still/x.py", "X = 1\n")
    repo.commit("more")
    repo.run("update-index", "--add", "--cacheinfo", f"160000,{repo.head},sub")
    old = repo.commit("submodule", add_all=False)
    repo.write("README.md", "# moved on\n")
    repo.commit("later")
    spy = PopenSpy(monkeypatch)
    with LocalGitSource(repo.path) as source:
        tree = source.tree(old)
        asked = ["README.md", "deep/er/still/x.py", "src/app.py", "link.md", "sub", "deep",
                 "deep/er", "README.md/x", "nope.py", "deep/nope/x.py", ""]
        found = {path: tree.get(path) for path in asked}
        assert _git_processes(spy, "ls-tree") == 0
        assert len(spy.catfiles()) == 1
        assert found["README.md"] == repo.blob("README.md", old) != repo.blob("README.md")
        assert found["deep/er/still/x.py"] == repo.blob("deep/er/still/x.py", old)
        assert [p for p, blob in found.items() if blob is None] == asked[3:]
        assert "src/app.py" in tree
        assert "link.md" not in tree
        with pytest.raises(KeyError):
            tree["sub"]
        walked = len(tree._walked)  # type: ignore[attr-defined]
        tree.get("README.md")
        assert len(tree._walked) == walked  # type: ignore[attr-defined]  # asked again: no walk
        # iterating lists the commit once, and agrees with what was found
        listed = dict(tree.items())
        assert _git_processes(spy, "ls-tree") == 1
        assert {p: b for p, b in found.items() if b is not None} == {
            p: listed[p] for p in found if p in listed}
        assert set(listed) == {"README.md", "src/app.py", "bin/run.sh", "deep/er/still/x.py"}


@symlinks
def test_what_a_path_is_is_read_from_the_tree_objects(
        repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """``entry_kind`` (asked for a cited file that is gone, and for each directory on
    its way) reads the tree objects on the path's way: no listing of the commit, whose
    scan cost a millisecond a question on a repository of 10,000 files."""
    (repo.path / "link.md").symlink_to("README.md")
    repo.write("deep/er/x.py", "X = 1\n")
    repo.commit("more")
    repo.run("update-index", "--add", "--cacheinfo", f"160000,{repo.head},sub")
    head = repo.commit("submodule", add_all=False)
    spy = PopenSpy(monkeypatch)
    with LocalGitSource(repo.path) as source:
        kinds = {path: source.entry_kind(head, path) for path in (
            "link.md", "sub", "deep", "deep/er", "deep/er/", "deep/er/x.py", "README.md",
            "nope", "deep/nope", "link.md/x", "sub/x", "README.md/x", "")}
        assert _git_processes(spy, "ls-tree") == 0
        assert kinds == {"link.md": "a symbolic link", "sub": "a submodule",
                         "deep": "a directory", "deep/er": "a directory",
                         "deep/er/": "a directory", "deep/er/x.py": None, "README.md": None,
                         "nope": None, "deep/nope": None, "link.md/x": None, "sub/x": None,
                         "README.md/x": None, "": None}
        assert no_file(source, head, "link.md/x.py", "HEAD") == (
            "link.md/x.py is behind the symbolic link link.md at HEAD, which is never followed")
        assert _git_processes(spy, "ls-tree") == 0


#: The source forked workers inherit (``test_forked_processes_read_through_their_own_pipe``).
_inherited_source: LocalGitSource | None = None


def _read_inherited(path: str) -> tuple[str | None, bytes, int]:
    """In a forked worker: ``path``'s blob at HEAD, read through the inherited source, and
    the pid of the cat-file process that answered."""
    assert _inherited_source is not None
    blob = _inherited_source.tree("HEAD").get(path)
    data = _inherited_source.read_blob(blob) if blob is not None else b""
    proc = _inherited_source._catfile.proc
    return blob, data, proc.pid if proc is not None else 0


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork")
def test_forked_processes_read_through_their_own_pipe(repo: GitRepo) -> None:
    """Workers forked from a process whose source has a cat-file running (the bulk check
    forks them) read through a cat-file of their own: on their parent's pipe they would
    read each other's replies (a tree looked up path by path reads through it)."""
    global _inherited_source
    with LocalGitSource(repo.path) as source:
        source.resolve("HEAD")  # the parent's cat-file is running
        # with replies asked ahead waiting in its pipe, which the workers never read
        source.read_blobs([repo.blob("src/app.py"), repo.blob("README.md")])
        parent = source._catfile.proc
        assert parent is not None
        _inherited_source = source
        try:
            with multiprocessing.get_context("fork").Pool(3) as pool:
                answers = pool.map_async(_read_inherited, ["README.md", "src/app.py"] * 6
                                         ).get(timeout=60)
        finally:
            _inherited_source = None
        assert [(blob, data) for blob, data, _ in answers] == [
            (repo.blob(p), (repo.path / p).read_bytes()) for p in ["README.md", "src/app.py"] * 6]
        assert parent.pid not in {pid for _, _, pid in answers}
        assert source._catfile.proc is parent  # the parent's pipe is still its own
        assert source.read_blob(repo.blob("README.md")) == (repo.path / "README.md").read_bytes()


def test_a_commit_asked_about_many_paths_is_listed_instead(
        repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    from verified_memory.sources import local_git

    monkeypatch.setattr(local_git, "_WALKS_BEFORE_LISTING", 3)
    spy = PopenSpy(monkeypatch)
    with LocalGitSource(repo.path) as source:
        tree = source.tree("HEAD")
        answers = [tree.get(p) for p in ("README.md", "src/app.py", "bin/run.sh", "x", "y")]
        assert answers == [repo.blob("README.md"), repo.blob("src/app.py"),
                           repo.blob("bin/run.sh"), None, None]
        assert _git_processes(spy, "ls-tree") == 1  # the fourth path: one listing


def test_paths_asked_ahead_do_not_count_toward_a_listing(
        repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookup whose tree objects were read ahead (``prefetch_paths``) asks git for
    nothing, so it does not bring the commit's listing nearer."""
    from verified_memory.sources import local_git

    monkeypatch.setattr(local_git, "_WALKS_BEFORE_LISTING", 3)
    for n in range(6):
        repo.write(f"d{n}/e/f.py", f"x = {n}\n")
    head = repo.commit("six folders")
    spy = PopenSpy(monkeypatch)
    with LocalGitSource(repo.path) as source:
        paths = [f"d{n}/e/f.py" for n in range(6)]
        source.prefetch_paths([(head, p) for p in paths])
        tree = source.tree(head)
        assert [tree.get(p) for p in paths] == [repo.blob(p) for p in paths]
        assert _git_processes(spy, "ls-tree") == 0


@symlinks
def test_changed_paths_come_from_the_diff_in_the_order_git_lists_them(
        repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """The files a diff names as new or changed, regular files only, in the order
    ``git ls-tree -r`` lists them (byte order: ``a-b.py`` < ``a.py`` < ``a/x.py`` <
    ``a0.py``, non-ASCII last), their blobs known from the diff: neither commit listed,
    no tree object read to look them up."""
    old = repo.head
    names = ["a.py", "a-b.py", "a/x.py", "a0.py", "\u00e9t\u00e9.py", "b/c/d.py", "Z.py"]
    for name in names:
        repo.write(name, f"{name!r}\n")
    (repo.path / "link.py").symlink_to("a.py")
    new = repo.commit("many names")
    listed = repo.run("ls-tree", "-r", "-z", "--name-only", new).split("\0")
    spy = PopenSpy(monkeypatch)
    with LocalGitSource(repo.path) as source:
        changed = source.changed_paths(old, new)
        assert list(changed or ()) == [p for p in listed if p in names]
        assert _git_processes(spy, "ls-tree") == 0
        reads = source._tree_reads
        tree = source.tree(new)
        assert [tree[p] for p in names] == [repo.blob(p, new) for p in names]
        assert source._tree_reads == reads


def test_a_tree_object_git_cannot_read_is_no_missing_path(repo: GitRepo) -> None:
    """A directory whose tree object is gone (a broken or partial repository) cannot be
    read: ``SourceUnavailable``, as listing the commit fails, never "no such file"."""
    head = repo.head
    tree_sha = repo.run("rev-parse", "HEAD:src")
    (repo.path / ".git" / "objects" / tree_sha[:2] / tree_sha[2:]).unlink()
    with LocalGitSource(repo.path) as source:
        tree = source.tree(head)
        assert tree.get("README.md") == repo.blob("README.md")
        with pytest.raises(SourceUnavailable, match="cannot read the tree"):
            tree.get("src/app.py")
        with pytest.raises(SourceUnavailable):
            dict(tree.items())


def test_a_sha256_repository_is_read_through_its_tree_objects(tmp_path: Path) -> None:
    """Object ids of 32 bytes in tree objects (``git init --object-format=sha256``):
    paths are found as the listing finds them, not misread as 20-byte ids."""
    repo = GitRepo(tmp_path / "repo", object_format="sha256")
    repo.write("src/deep/app.py", "def main():\n    return 1\n")
    repo.write("README.md", "# demo\n")
    head = repo.commit("first")
    with LocalGitSource(repo.path) as source:
        tree = source.tree(head)
        assert len(head) == 64
        assert tree.get("src/deep/app.py") == repo.blob("src/deep/app.py")
        assert tree.get("README.md") == repo.blob("README.md")
        assert tree.get("src/deep") is None
        assert dict(tree.items()) == {"README.md": repo.blob("README.md"),
                                      "src/deep/app.py": repo.blob("src/deep/app.py")}


@symlinks
def test_changed_paths_are_the_files_whose_blob_changed(repo: GitRepo) -> None:
    """From the rename diff: added, edited, renamed, and a link become a file; not a
    mode change alone, a deletion, or a file become a link. The same list, in the same
    order, as diffing the two commits' listings."""
    repo.write("keep.py", "K = 1\n")
    repo.write("edit.py", "E = 1\n")
    repo.write("mode.sh", "echo\n")
    repo.write("gone.py", "G = 1\n")
    repo.write("moved.py", "def moved():\n    return 'a long enough body'\n")
    (repo.path / "was_link.md").symlink_to("README.md")
    repo.write("to_link.md", "text\n")
    old = repo.commit("before")
    repo.write("edit.py", "E = 2\n")
    (repo.path / "mode.sh").chmod(0o755)
    repo.remove("gone.py")
    repo.move("moved.py", "pkg/moved.py")
    (repo.path / "was_link.md").unlink()
    repo.write("was_link.md", "now a file\n")
    (repo.path / "to_link.md").unlink()
    (repo.path / "to_link.md").symlink_to("README.md")
    repo.write("new/added.py", "A = 1\n")
    new = repo.commit("after")
    with LocalGitSource(repo.path) as source:
        changed = source.changed_paths(old, new)
        before, after = dict(source.tree(old).items()), source.tree(new)
        assert changed == [p for p, blob in after.items() if before.get(p) != blob]
        assert sorted(changed or []) == ["edit.py", "new/added.py", "pkg/moved.py",
                                         "was_link.md"]
        assert [(r.old, r.new) for r in source.renames(old, new)] == [
            ("gone.py", None), ("moved.py", "pkg/moved.py")]


def test_renames_detects_a_rename_and_a_deletion(repo: GitRepo, source: LocalGitSource) -> None:
    old = repo.head
    repo.move("src/app.py", "src/main.py")
    repo.remove("README.md")
    new = repo.commit("move and delete")
    found = source.renames(old, new)
    assert set(found) == {Rename("src/app.py", "src/main.py", 100), Rename("README.md", None)}
    assert source.renames(old, "HEAD") == found
    assert source.renames(new, new) == ()


def test_renames_with_an_edit_reports_similarity(repo: GitRepo, source: LocalGitSource) -> None:
    body = "".join(f"line {i}\n" for i in range(40))
    repo.write("long.py", body)
    old = repo.commit("long")
    repo.remove("long.py")
    repo.write("pkg/long.py", body + "one more\n")
    repo.commit("moved and edited")
    (rename,) = source.renames(old, "HEAD")
    assert (rename.old, rename.new) == ("long.py", "pkg/long.py")
    assert 50 <= rename.similarity < 100


def _moved_across_kinds(repo: GitRepo) -> tuple[str, str]:
    """Commits before and after a Python file is renamed to another ending, a guide
    is moved, a file whose ending is upper case is moved, and a Python file added."""
    body = "".join(f"line {i}\n" for i in range(40))
    repo.write("tool.py", body)
    repo.write("docs/guide.md", body + "guide\n")
    repo.write("Main.PY", body + "main\n")
    old = repo.commit("files")
    repo.move("tool.py", "tool.pyx")
    repo.move("docs/guide.md", "guide.md")
    repo.move("Main.PY", "pkg/Main.PY")
    repo.write("new.py", "Y = 2\n")
    return old, repo.commit("moves")


PYTHON_ENDINGS = (".py", ".pyi")


def test_renames_among_some_endings_keep_to_those_files(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``suffixes``, git looks for renames among those files only (a pathspec: it
    compares far fewer files where a restructure moves hundreds of others), in any
    case: a file renamed to another ending is deleted there, a document moved is not
    seen, and the changed paths are those files'; what ``narrowed`` says of the whole
    answer. A diff started ahead for those endings is the one collected."""
    old, new = _moved_across_kinds(repo)
    spy = PopenSpy(monkeypatch)
    with LocalGitSource(repo.path) as source:
        every = source.renames(old, new)
        assert {(r.old, r.new) for r in every} == {
            ("tool.py", "tool.pyx"), ("docs/guide.md", "guide.md"), ("Main.PY", "pkg/Main.PY")}
        source.prefetch_renames([(old, new)], suffixes=PYTHON_ENDINGS)
        started = len(_diff_trees(spy))
        among = source.renames(old, new, suffixes=PYTHON_ENDINGS)
        assert {(r.old, r.new) for r in among} == {("tool.py", None), ("Main.PY", "pkg/Main.PY")}
        assert set(among) == set(narrowed(every, PYTHON_ENDINGS))
        assert source.changed_paths(old, new, suffixes=PYTHON_ENDINGS) == [
            "new.py", "pkg/Main.PY"]
        assert len(_diff_trees(spy)) == started  # the one started ahead, collected
        assert source.renames(old, new, suffixes=(".md",)) == (
            Rename("docs/guide.md", "guide.md", 100),)


def test_worktree_and_dict_sources_find_renames_among_some_endings(repo: GitRepo) -> None:
    old, _ = _moved_across_kinds(repo)
    repo.run("reset", "--soft", old)  # the moves in the working tree only
    with WorktreeSource(repo.path) as worktree:
        found = worktree.renames(old, "worktree", suffixes=PYTHON_ENDINGS)
        assert {(r.old, r.new) for r in found} == {("tool.py", None), ("Main.PY", "pkg/Main.PY")}
    dicts = DictSource({"old": {"a.py": "x\n", "b.py": "y\n"},
                        "new": {"a.pyx": "x\n", "pkg/b.py": "y\n"}})
    assert set(dicts.renames("old", "new", suffixes=PYTHON_ENDINGS)) == {
        Rename("a.py", None), Rename("b.py", "pkg/b.py", 100)}


def _diff_trees(spy: PopenSpy) -> list[subprocess.Popen[bytes]]:
    return [p for p in spy.started if "diff-tree" in list(map(str, p.args))]  # type: ignore[arg-type]


def test_prefetched_renames_are_collected_not_run_again(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = repo.head
    repo.move("src/app.py", "src/main.py")
    repo.remove("README.md")
    new = repo.commit("move and delete")
    with LocalGitSource(repo.path) as direct:
        expected = direct.renames(old, new)
    spy = PopenSpy(monkeypatch)
    with LocalGitSource(repo.path) as source:
        # the same pair twice, and pairs that are not full shas: one process
        source.prefetch_renames([(old, new), (old, new), ("HEAD", new), (old, "nope")])
        assert len(_diff_trees(spy)) == 1
        assert source.renames(old, new) == expected
        assert source.renames(old, "HEAD") == expected  # cached
        assert len(_diff_trees(spy)) == 1
        source.prefetch_renames([(old, new)])  # answered already: nothing started
        assert len(_diff_trees(spy)) == 1


def test_prefetched_renames_are_bounded_and_stopped_by_close(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    commits = [repo.head]
    for i in range(6):
        repo.write(f"f{i}.txt", f"{i}\n")
        commits.append(repo.commit(f"c{i}"))
    spy = PopenSpy(monkeypatch)
    source = LocalGitSource(repo.path)
    source.prefetch_renames((c, commits[-1]) for c in commits[:-1])
    started = _diff_trees(spy)
    assert len(started) == 4  # at most _PENDING_DIFFS git processes waiting
    source.close()
    assert all(p.poll() is not None for p in started)  # none left running
    assert source.renames(commits[0], commits[-1]) == ()  # still answers, after close


def test_a_prefetched_diff_of_an_unknown_commit_still_says_not_found(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = PopenSpy(monkeypatch)
    with LocalGitSource(repo.path) as source:
        source.prefetch_renames([("0" * 40, repo.head)])  # git will refuse it
        with pytest.raises(NotFound, match="does not exist"):
            source.renames("0" * 40, repo.head)
    assert all(p.poll() is not None for p in _diff_trees(spy))  # stopped by close


def test_renames_of_unknown_revision(source: LocalGitSource) -> None:
    with pytest.raises(NotFound):
        source.renames("HEAD", "nope")


# --------------------------------------------------------------------------- repositories


def test_bare_repository(repo: GitRepo, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    repo.run("clone", "-q", "--bare", os.fspath(repo.path), os.fspath(bare))
    with LocalGitSource(bare) as source:
        assert source.resolve("HEAD") == repo.head
        tree = source.tree("main")
        assert source.read_blob(tree["src/app.py"]) == b"def main():\n    return 1\n"


def test_a_subdirectory_of_a_working_copy_reads_the_whole_repository(repo: GitRepo) -> None:
    with LocalGitSource(repo.path / "src") as source:
        assert set(source.tree("HEAD")) == {"README.md", "src/app.py", "bin/run.sh"}


def test_not_a_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(NotFound, match=r"plain is not a git repository$"):
        LocalGitSource(plain)
    with pytest.raises(NotFound, match="no such directory"):
        LocalGitSource(tmp_path / "missing")
    with pytest.raises(NotFound, match="not a git repository"):
        WorktreeSource(plain)


def test_git_not_installed(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", os.fspath(empty))
    with pytest.raises(SourceUnavailable, match="git is not installed"):
        LocalGitSource(repo.path)
    with pytest.raises(SourceUnavailable, match="git is not installed"):
        find_working_copy(repo.path)


def test_git_not_installed_after_construction(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LocalGitSource(repo.path) as source:
        monkeypatch.setenv("PATH", os.fspath(tmp_path))
        with pytest.raises(SourceUnavailable, match="git is not installed"):
            source.resolve("HEAD")
        with pytest.raises(SourceUnavailable, match="git is not installed"):
            source.renames("HEAD", "HEAD")


def test_git_environment_of_a_hook_does_not_redirect(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = GitRepo(tmp_path / "other")
    other.write("other.txt", "other\n")
    other.commit("other")
    monkeypatch.setenv("GIT_DIR", os.fspath(other.path / ".git"))
    with LocalGitSource(repo.path) as source:
        assert source.resolve("HEAD") == repo.head
        assert "other.txt" not in source.tree("HEAD")


@pytest.mark.parametrize("variable", ["GIT_LITERAL_PATHSPECS", "GIT_NOGLOB_PATHSPECS",
                                      "GIT_GLOB_PATHSPECS"])
def test_the_callers_pathspec_settings_do_not_change_the_renames_found(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """A rename diff among some endings reads its pathspecs as ``:(icase)*.py``, whatever
    the environment says of pathspecs (literal, read ``*`` as a plain star, or as a
    glob that stays in its folder, each of which would match nothing here)."""
    old, new = _moved_across_kinds(repo)
    monkeypatch.setenv(variable, "1")
    with LocalGitSource(repo.path) as source:
        assert {(r.old, r.new) for r in source.renames(old, new, suffixes=PYTHON_ENDINGS)} \
            == {("tool.py", None), ("Main.PY", "pkg/Main.PY")}


# --------------------------------------------------------------------------- worktree


@pytest.fixture
def worktree(repo: GitRepo) -> Iterator[WorktreeSource]:
    repo.write(".gitignore", "*.log\nbuild/\n")
    repo.commit("ignore")
    with WorktreeSource(repo.path) as source:
        yield source


def test_worktree_sees_edits_and_untracked_but_not_ignored_files(
    repo: GitRepo, worktree: WorktreeSource
) -> None:
    edited = b"def main():\n    return 2\n"
    repo.write("src/app.py", edited)
    repo.write("notes/todo.md", "untracked\n")
    repo.write("debug.log", "ignored\n")
    repo.write("build/out.js", "ignored\n")
    repo.remove("README.md")
    assert worktree.resolve("HEAD") == "worktree"
    assert worktree.resolve("any-branch-at-all") == "worktree"
    tree = worktree.tree(worktree.resolve("HEAD"))
    assert set(tree) == {".gitignore", "src/app.py", "bin/run.sh", "notes/todo.md"}
    assert len(tree) == 4
    assert tree["src/app.py"] == git_blob_sha(edited)
    assert tree["bin/run.sh"] == repo.blob("bin/run.sh")  # unmodified: same as committed
    assert "debug.log" not in tree
    assert "README.md" not in tree
    assert tree.get("build/out.js") is None
    assert worktree.read_blob(tree["src/app.py"]) == edited


def test_worktree_tree_is_live(repo: GitRepo, worktree: WorktreeSource) -> None:
    tree = worktree.tree("worktree")
    before = tree["src/app.py"]
    repo.write("src/app.py", "def main():\n    return 3\n")
    assert tree["src/app.py"] != before  # an edit is seen at once
    repo.write("fresh.py", "new\n")
    assert tree["fresh.py"] == git_blob_sha(b"new\n")  # so is a file created since listing
    assert "fresh.py" in set(worktree.tree("worktree"))


def test_worktree_read_blob_does_not_reopen_the_file(
    repo: GitRepo, worktree: WorktreeSource
) -> None:
    repo.write("scratch.py", "x = 1\n")
    sha = worktree.tree("worktree")["scratch.py"]
    repo.remove("scratch.py")
    assert worktree.read_blob(sha) == b"x = 1\n"


def test_worktree_read_blob_falls_back_to_committed_objects(
    repo: GitRepo, worktree: WorktreeSource
) -> None:
    committed = repo.blob("src/app.py")
    repo.write("src/app.py", "changed\n")
    assert worktree.read_blob(committed) == b"def main():\n    return 1\n"
    with pytest.raises(NotFound):
        worktree.read_blob("0" * 40)


@symlinks
def test_worktree_skips_symlinks(repo: GitRepo, worktree: WorktreeSource) -> None:
    (repo.path / "link.md").symlink_to("README.md")
    (repo.path / "outside.md").symlink_to("/etc/hostname")
    tree = worktree.tree("worktree")
    assert "link.md" not in tree
    assert tree.get("outside.md") is None
    assert "link.md" not in set(tree)


def test_worktree_refuses_paths_outside_the_working_copy(
    repo: GitRepo, worktree: WorktreeSource, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("secret\n")
    tree = worktree.tree("worktree")
    assert tree.get("../secret.txt") is None
    assert tree.get(os.fspath(tmp_path / "secret.txt")) is None


def test_worktree_other_revisions_and_bare(
    repo: GitRepo, worktree: WorktreeSource, tmp_path: Path
) -> None:
    with pytest.raises(NotFound, match="only 'worktree'"):
        worktree.tree(repo.head)
    with pytest.raises(NotFound):
        worktree.resolve("-rf")
    bare = tmp_path / "bare.git"
    repo.run("clone", "-q", "--bare", os.fspath(repo.path), os.fspath(bare))
    with pytest.raises(NotFound, match="bare"):
        WorktreeSource(bare)


def test_worktree_from_a_subdirectory_uses_the_top_level(repo: GitRepo) -> None:
    with WorktreeSource(repo.path / "src") as source:
        assert source.root.resolve() == repo.path.resolve()
        assert "README.md" in source.tree("worktree")


def test_worktree_renames(repo: GitRepo, worktree: WorktreeSource) -> None:
    repo.run("mv", "src/app.py", "src/main.py")
    repo.remove("bin/run.sh")
    found = worktree.renames(repo.head, "worktree")
    assert set(found) == {Rename("src/app.py", "src/main.py", 100), Rename("bin/run.sh", None)}
    assert set(worktree.renames("worktree", "worktree")) == set(found)  # from HEAD
    assert set(worktree.renames("0" * 40, "worktree")) == set(found)  # unknown: from HEAD


def test_worktree_renames_without_commits(tmp_path: Path) -> None:
    empty = GitRepo(tmp_path / "empty")
    empty.write("a.py", "a\n")
    with WorktreeSource(empty.path) as source:
        assert source.renames("worktree", "worktree") == []
        assert set(source.tree("worktree")) == {"a.py"}


# --------------------------------------------------------------------------- DictSource


def test_dict_source() -> None:
    source = DictSource({
        "c1": {"app.py": "print(1)\n", "old.py": "gone\n", "img.bin": b"\x00\x01"},
        "c2": {"src/app.py": "print(1)\n", "img.bin": b"\x00\x01"},
    }, refs={"HEAD": "c2", "main": "c2", "v1": "c1"})
    assert source.resolve("HEAD") == "c2"
    assert source.resolve("v1") == "c1"
    assert source.resolve("c1") == "c1"
    tree = source.tree("c2")
    assert tree["src/app.py"] == git_blob_sha(b"print(1)\n")
    assert source.tree("main") is tree
    assert source.read_blob(tree["img.bin"]) == b"\x00\x01"
    assert source.blob_reads == {tree["img.bin"]: 1}
    assert source.renames("c1", "c2") == [
        Rename("app.py", "src/app.py", 100), Rename("old.py", None),
    ]
    with pytest.raises(NotFound):
        source.resolve("nope")
    with pytest.raises(NotFound):
        source.read_blob("0" * 40)


def test_dict_source_defaults_head_to_the_last_commit_and_can_move() -> None:
    source = DictSource({"aaaa1111": {"a.py": "1\n"}, "aaaa2222": {"a.py": "2\n"}})
    assert source.resolve("HEAD") == "aaaa2222"
    assert source.resolve("aaaa1") == "aaaa1111"  # an unambiguous prefix
    with pytest.raises(NotFound, match="ambiguous"):
        source.resolve("aaaa")
    source.refs["HEAD"] = "aaaa1111"
    assert source.resolve("HEAD") == "aaaa1111"
    source.add_commit("c3", {"a.py": "3\n"})
    assert source.resolve("HEAD") == "c3"
    assert source.commits == ("aaaa1111", "aaaa2222", "c3")
    with pytest.raises(ValidationError):
        DictSource({"c": {}}, refs={"HEAD": "missing"})


def test_dict_source_simulates_an_outage() -> None:
    source = DictSource({"c": {"a.py": "a\n"}})
    sha = source.tree("HEAD")["a.py"]
    source.fail_with = ConnectionError("network down")
    calls: list[Any] = [
        lambda: source.resolve("HEAD"), lambda: source.tree("c"),
        lambda: source.read_blob(sha), lambda: source.renames("c", "c"),
    ]
    for call in calls:
        with pytest.raises(SourceUnavailable, match="network down"):
            call()
    source.fail_with = SourceUnavailable("rate limited")
    with pytest.raises(SourceUnavailable, match=r"^rate limited$"):
        source.resolve("HEAD")
    source.fail_with = None
    assert source.read_blob(sha) == b"a\n"
    with source:
        pass
    assert source.closed


def test_dict_source_matches_a_real_repository(repo: GitRepo, source: LocalGitSource) -> None:
    files: Mapping[str, bytes] = {
        path: source.read_blob(sha) for path, sha in source.tree("HEAD").items()
    }
    fake = DictSource({"c": files})
    assert dict(fake.tree("HEAD")) == dict(source.tree("HEAD"))


# --------------------------------------------------------------------------- discovery


@pytest.mark.parametrize(("url", "expected"), [
    ("https://github.com/owner/name", "owner/name"),
    ("https://github.com/owner/name.git", "owner/name"),
    ("https://github.com/owner/name/", "owner/name"),
    ("https://github.com/owner/name.git/", "owner/name"),
    ("http://github.com/owner/name", "owner/name"),
    ("git@github.com:owner/name.git", "owner/name"),
    ("git@github.com:owner/name", "owner/name"),
    ("github.com:owner/name.git", "owner/name"),
    ("ssh://git@github.com/owner/name.git", "owner/name"),
    ("ssh://git@github.com:22/owner/name.git", "owner/name"),
    ("git://github.com/owner/name.git", "owner/name"),
    ("https://user:s3cr3t-token@github.com/owner/name.git", "owner/name"),
    ("https://x-access-token:ghp_abc@github.com/owner/name", "owner/name"),
    ("https://github.example.com/team/service.git", "team/service"),
    ("git@ghe.corp.internal:team/service.git", "team/service"),
    ("https://gitlab.com/group/subgroup/name.git", "subgroup/name"),
    ("ssh://git@host:2222/a/b/c/my.repo.git", "c/my.repo"),
    ("https://github.com/only-owner", None),
    ("/srv/git/owner/name.git", None),
    ("file:///srv/git/owner/name.git", None),
    ("C:\\repos\\owner\\name", None),
    ("../relative/path", None),
    ("", None),
    ("https://github.com/owner/na me", None),
])
def test_parse_remote_url(url: str, expected: str | None) -> None:
    assert parse_remote_url(url) == expected


@pytest.mark.parametrize("url", [
    "https://github.com/owner/name.git",
    "git@github.com:owner/name.git",
    "ssh://git@github.com:22/owner/name.git",
    "https://user:s3cr3t@github.example.com/owner/name.git",
    "https://gitlab.example.com/deep/group/owner/name",
])
def test_repo_from_remote(repo: GitRepo, url: str) -> None:
    repo.run("remote", "add", "origin", url)
    result = repo_from_remote(repo.path)
    assert result == "owner/name"
    assert "s3cr3t" not in str(result)


@pytest.mark.parametrize(("url", "said"), [
    ("/srv/git/acme/app.git", "remote of {wc} (/srv/git/acme/app.git) names no hosted"),
    ("file:///srv/git/acme/app.git", "(file:///srv/git/acme/app.git) names no hosted"),
    ("https://user:s3cr3t@github.com/only-owner", "remote of {wc} names no hosted owner"),
])
def test_why_a_remote_names_no_repository(repo: GitRepo, url: str, said: str) -> None:
    assert no_repo_named(repo.path) == f"{repo.path} has no origin remote"
    repo.run("remote", "add", "origin", url)
    assert repo_from_remote(repo.path) is None
    assert said.format(wc=repo.path) in no_repo_named(repo.path)
    assert "s3cr3t" not in no_repo_named(repo.path)


def test_repo_from_remote_without_remote(repo: GitRepo, tmp_path: Path) -> None:
    assert repo_from_remote(repo.path) is None
    repo.run("remote", "add", "upstream", "git@github.com:up/stream.git")
    assert repo_from_remote(repo.path) is None
    assert repo_from_remote(repo.path, "upstream") == "up/stream"
    assert repo_from_remote(repo.path, "--help") is None
    assert repo_from_remote(tmp_path) is None  # not a repository at all


def test_find_working_copy(repo: GitRepo, tmp_path: Path) -> None:
    top = repo.path.resolve()
    assert find_working_copy(repo.path) == top
    assert find_working_copy(repo.path / "src") == top
    assert find_working_copy(repo.path / "src" / "app.py") == top  # a file
    assert find_working_copy(repo.path / "src" / "not" / "yet") == top  # not created yet
    outside = tmp_path / "outside"
    outside.mkdir()
    assert find_working_copy(outside) is None
    assert find_working_copy(repo.path / ".git" / "objects") is None
    bare = tmp_path / "bare.git"
    repo.run("clone", "-q", "--bare", os.fspath(repo.path), os.fspath(bare))
    assert find_working_copy(bare) is None


@pytest.mark.parametrize(("url", "host"), [
    ("https://user:secret@GitHub.com/acme/app.git", "github.com"),
    ("git@ghe.example.com:acme/app.git", "ghe.example.com"),
    ("ssh://git@github.com:22/acme/app", "github.com"),
    ("file:///srv/app.git", None),
    ("C:\\work\\app", None),
    ("../app", None),
])
def test_remote_host(url: str, host: str | None) -> None:
    from verified_memory.sources.discovery import remote_host

    assert remote_host(url) == host
