"""How many GitHub API requests a verification pass costs (a script, not a timed test).

    python benchmarks/github_requests.py

A fake GitHub (``responses``, answering exactly as api.github.com does: ETags, 304s,
base64 blobs, rate-limit headers) serves a repository of 200 Python files at commit A
and at commit B, where 20 files changed (two lines inserted at the top, so the cited
code moved down). 1,000 memories cite it, 3 citations each, made at A. Counted in one
run, and printed as a markdown table:

- the naive way: one contents-API request per citation (PyGithub ``get_contents``);
- verified-memory, first pass at B: resolve the ref, list the tree once, read each
  changed cited file once by blob sha (``Verifier`` with the anchor locator, as the
  service runs it); target: at most 22 requests;
- a second pass on the unchanged ref from a new process (same disk cache): the ref is a
  304, everything else is cached; target: 0 requests counted against the rate limit;
- the same two passes as ``vmem verify`` runs them (``MemoryService.verify`` over a
  SQLite store, its own cold cache), where the ref rule adds its questions: which
  branch is the default (a conditional request, a 304 once known), and, once in a
  memory's life, whether the commit it cites is on that branch (one ``compare`` per
  commit: here all memories cite A); target: at most 24 requests, then 0 counted;
- for contrast, a pass at C where one cited file was renamed, so its citations must be
  searched for in other files (``compare`` for the renames, whose list of changed
  files spares listing the old tree); target: ref, tree, compare, the renamed blob.
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import responses  # noqa: E402
from github import Auth, Github  # noqa: E402

from tests.github_payloads import FakeGitHub  # noqa: E402
from verified_memory import Memory, MemoryService  # noqa: E402
from verified_memory.anchors.fingerprint import fingerprint_lines  # noqa: E402
from verified_memory.anchors.treesitter import anchor_for  # noqa: E402
from verified_memory.models import Citation, CitationCheck  # noqa: E402
from verified_memory.sources.base import git_blob_sha  # noqa: E402
from verified_memory.sources.github import GitHubSource  # noqa: E402
from verified_memory.store.sqlite import SQLiteStore  # noqa: E402
from verified_memory.verify.ladder import Verifier  # noqa: E402

REPO = "bench/app"
TOKEN = "bench-token-not-secret"
FILES, CHANGED, MEMORIES, PER_MEMORY = 200, 20, 1_000, 3


def module(i: int) -> str:
    """A Python file of about 60 lines, every function distinct."""
    parts = [f'"""Module {i}: generated for the request benchmark."""\n', "import os\n"]
    for f in range(8):
        parts.append(
            f"\n\ndef handler_{i}_{f}(request, retries={f + 1}):\n"
            f"    key = 'k{i}-{f}'\n"
            f"    value = request.get(key, {i * f})\n"
            f"    if value > {f * 10}:\n"
            f"        return os.path.join('m{i}', str(value))\n"
            f"    return None\n"
        )
    return "".join(parts)


def build() -> tuple[FakeGitHub, dict[str, str], list[list[Citation]], dict[str, str]]:
    rng = random.Random(20240611)
    fake = FakeGitHub(REPO)
    files_a = {f"app/pkg{i // 20:02d}/mod{i:03d}.py": module(i) for i in range(FILES)}
    commit_a = fake.commit(files_a)
    paths = sorted(files_a)
    changed = set(rng.sample(paths, CHANGED))
    files_b = {p: ("# edited in B\nimport sys\n" + t if p in changed else t)
               for p, t in files_a.items()}
    fake.commit(files_b)
    memories: list[list[Citation]] = []
    for _ in range(MEMORIES):
        cites = []
        for path in rng.sample(paths, PER_MEMORY):
            text = files_a[path]
            lines = text.splitlines()
            # 2-4 lines inside one function, as an agent cites code (with its anchor)
            defs = [n for n, line in enumerate(lines, 1) if line.startswith("def ")]
            start = rng.choice(defs) + rng.randrange(0, 3)
            end = start + rng.randrange(1, 4)
            blob = git_blob_sha(text.encode())
            cites.append(Citation(path, start, end, commit_a, blob, fingerprint_lines(
                lines, start, end, anchor=anchor_for(path, text, start, end, key=blob))))
        memories.append(cites)
    return fake, files_b, memories, {"A": commit_a}


def verify_pass(source: GitHubSource, memories: Sequence[list[Citation]],
                ref: str = "main") -> tuple[list[CitationCheck], float]:
    """One pass as the service runs it: resolve once, one verifier, memory by memory."""
    from verified_memory.verify.anchored import AnchorLocator

    started = time.perf_counter()
    revision = source.resolve(ref)
    verifier = Verifier(source, locator=AnchorLocator())
    checks: list[CitationCheck] = []
    for citations in memories:
        checks += verifier.check(citations, revision)
    return checks, time.perf_counter() - started


def naive_pass(fake: FakeGitHub, memories: Sequence[list[Citation]]) -> tuple[int, float]:
    """One contents-API request per citation, through PyGithub, as a script would."""
    started = time.perf_counter()
    client = Github(auth=Auth.Token(TOKEN), retry=None, seconds_between_requests=None,
                    lazy=True)
    repo = client.get_repo(REPO)  # lazy client: no request for the repository itself
    before = fake.calls["contents"]
    for citations in memories:
        for c in citations:
            repo.get_contents(c.path, ref="main").decoded_content  # noqa: B018
    client.close()
    return fake.calls["contents"] - before, time.perf_counter() - started


Row = tuple[str, int, int, str, str, float]


def _row(label: str, source: GitHubSource, spent: Counter[str],
         checks: Sequence[CitationCheck], seconds: float) -> Row:
    outcomes = Counter(c.outcome.value for c in checks)
    return (label, source.requests, source.rate_limited_requests,
            " ".join(f"{k}={v}" for k, v in sorted(spent.items())),
            " ".join(f"{k}={v}" for k, v in sorted(outcomes.items())), seconds)


def run_passes(fake: FakeGitHub, files_b: dict[str, str], memories: Sequence[list[Citation]],
               cache: Path) -> list[Row]:
    rows: list[Row] = []
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake.install(rsps)

        naive, seconds = naive_pass(fake, memories)
        rows.append(("naive: contents API, one request per citation", naive, naive,
                     f"contents={naive}", "-", seconds))

        for label in ("first pass at B (cold cache)",
                      "second pass, unchanged ref, new process (warm disk cache)"):
            before = Counter(fake.calls)
            with GitHubSource(REPO, TOKEN, cache_dir=cache) as src:  # a new process each
                checks, seconds = verify_pass(src, memories)
            rows.append(_row(label, src, Counter(fake.calls) - before, checks, seconds))

        rows += service_passes(fake, memories, cache.parent / "service")

        # Contrast: at C one cited file was renamed; its citations are searched elsewhere.
        renamed = memories[0][0].path
        files_c = dict(files_b)
        files_c[renamed.replace("/mod", "/moved_mod")] = files_c.pop(renamed)
        fake.commit(files_c)
        before = Counter(fake.calls)
        with GitHubSource(REPO, TOKEN, cache_dir=cache) as src:
            checks, seconds = verify_pass(src, memories)
        rows.append(_row(f"pass at C: one cited file renamed ({renamed.rsplit('/', 1)[1]})",
                         src, Counter(fake.calls) - before, checks, seconds))
    return rows


def service_passes(fake: FakeGitHub, memories: Sequence[list[Citation]],
                   workdir: Path) -> list[Row]:
    """The first and a repeat pass as ``vmem verify`` runs them: the service, a SQLite
    store holding the memories, a GitHub source with a cold cache of its own."""
    workdir.mkdir()
    with SQLiteStore(workdir / "bench.db") as store:
        for n, citations in enumerate(memories):
            store.add(Memory(id=str(uuid.uuid4()), repo=REPO,
                             subject=f"handler convention {n}",
                             fact="How handlers read their key.", citations=tuple(citations)))
    rows: list[Row] = []
    for label in ("vmem verify, first pass at B (the ref rule's requests included)",
                  "vmem verify, second pass, unchanged ref, new process"):
        before = Counter(fake.calls)
        source = GitHubSource(REPO, TOKEN, cache_dir=workdir / "cache")
        with MemoryService(SQLiteStore(workdir / "bench.db"), source) as service:
            report = service.verify(repo=REPO, ref="main")  # closes both when done
        checks = [c for v in report.verifications for c in v.checks]
        rows.append(_row(label, source, Counter(fake.calls) - before, checks,
                         report.duration_ms / 1000))
    return rows


def main() -> None:
    fake, files_b, memories, commits = build()
    citations = sum(len(m) for m in memories)
    work = Path(tempfile.mkdtemp(prefix="vmem-gh-bench-"))
    try:
        rows = run_passes(fake, files_b, memories, work / "cache")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"# GitHub requests for one verification pass: {MEMORIES:,} memories x "
          f"{PER_MEMORY} citations = {citations:,} citations over {FILES} files, "
          f"{CHANGED} changed since the citations' commit {commits['A'][:7]}\n")
    print("| pass | requests sent | counted against rate limit | by endpoint | outcomes "
          "| seconds (mocked HTTP) |")
    print("|---|---:|---:|---|---|---:|")
    for label, sent, limited, endpoints, outcomes_text, secs in rows:
        print(f"| {label} | {sent:,} | {limited:,} | {endpoints} | {outcomes_text} "
              f"| {secs:.2f} |")
    naive, first, second, served, served_again, renamed = rows
    print()
    print(f"- first pass: {first[1]} requests (target <= {2 + CHANGED}: ref, tree, "
          f"{CHANGED} blobs) vs {naive[1]:,} the naive way: "
          f"{naive[1] / max(first[1], 1):.0f}x fewer")
    print(f"- second pass on the unchanged ref: {second[2]} requests counted against the "
          f"rate limit (target 0; {second[1]} conditional request answered 304)")
    print(f"- vmem verify: {served[1]} requests on the first pass (target <= {4 + CHANGED}: "
          f"the above, the default branch, one compare for the memories' commit), "
          f"{served_again[2]} counted on the second ({served_again[1]} answered 304)")
    print(f"- one cited file renamed: {renamed[1]} requests (target <= 4: ref, tree, "
          "compare, the renamed blob)")
    ok = (first[1] <= 2 + CHANGED and second[2] == 0 and served[1] <= 4 + CHANGED
          and served_again[2] == 0 and renamed[1] <= 4)
    print(f"- targets {'met' if ok else 'NOT met'}")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
