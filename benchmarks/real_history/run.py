"""Run the real-history benchmark and print markdown tables (see README.md beside this file).

    .venv/bin/python -m benchmarks.real_history.run --mirrors DIR     # or VMEM_BENCH_MIRRORS
    .venv/bin/python -m benchmarks.real_history.run --mirrors DIR --quick
    .venv/bin/python -m benchmarks.real_history.run --mirrors DIR --out results.md \
        --failures fails.jsonl --repos pallets/flask,gin-gonic/gin
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.real_history import label as labels
from benchmarks.real_history import sample
from benchmarks.real_history.gitread import Git
from benchmarks.real_history.oracles import Oracles
from benchmarks.real_history.repos import REPOS, Repo, find_mirror, mirrors_root
from benchmarks.relocation.baseline import check_with_diff
from benchmarks.relocation.run import NA, pct
from verified_memory.anchors import treesitter
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.verify.bulk import check_citations

HOLDS = ("valid", "relocated")
BREAKS = ("changed", "missing")
SCORED = ("same", "moved", "changed", "missing")


# ----------------------------------------------------------------------------- scoring


@dataclass
class Score:
    same: int = 0
    same_ok: int = 0
    moved: int = 0
    moved_ok: int = 0
    false_inval: int = 0
    broken: int = 0
    missed: int = 0
    cvm_ok: int = 0
    checked: int = 0  # every citation run, scored or not (for the rates)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return self.same + self.moved + self.broken

    def add(self, other: Score) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def judge(lab: labels.Label, result: dict[str, Any]) -> str:
    """ok | wrong_place | false_inval | missed | wrong_verdict | error."""
    status = result.get("status")
    if status not in (*HOLDS, *BREAKS):
        return "error"
    place = (result.get("path"), result.get("line_start"), result.get("line_end"))
    if lab.expect in ("same", "moved"):
        if status in BREAKS:
            return "false_inval"
        return "ok" if place == (lab.path, lab.start, lab.end) else "wrong_place"
    if status in HOLDS:
        return "missed"
    if lab.expect == "changed":
        return "ok" if status == "changed" and result.get("path") == lab.path \
            else "wrong_verdict"
    return "ok" if status == "missing" else "wrong_verdict"


def score(cases: Iterable[tuple[labels.Label, dict[str, Any]]]) -> Score:
    s = Score()
    for lab, result in cases:
        if lab.expect not in SCORED:
            continue
        verdict = judge(lab, result)
        if lab.expect == "same":
            s.same += 1
            s.same_ok += verdict == "ok"
        elif lab.expect == "moved":
            s.moved += 1
            s.moved_ok += verdict == "ok"
        else:
            s.broken += 1
            s.missed += verdict == "missed"
            s.cvm_ok += verdict == "ok"
        s.false_inval += verdict == "false_inval"
    return s


def rate(s: Score) -> str:
    return f"{s.checked / s.seconds:,.0f}" if s.seconds else NA


def cells(ours: Score, base: Score) -> list[str]:
    def pair(num: Callable[[Score], int], den: Callable[[Score], int]) -> str:
        return f"{pct(num(ours), den(ours))} · {pct(num(base), den(base))}"

    return [
        str(ours.total),
        pair(lambda s: s.same_ok, lambda s: s.same),
        pair(lambda s: s.moved_ok, lambda s: s.moved),
        pair(lambda s: s.false_inval, lambda s: s.same + s.moved),
        pair(lambda s: s.missed, lambda s: s.broken),
        pair(lambda s: s.cvm_ok, lambda s: s.broken),
        rate(ours), rate(base),
        f"{ours.seconds / base.seconds:.1f}x" if base.seconds else NA,
    ]


HEADER = ["citations scored", "kept valid", "exact relocation", "false invalidation",
          "missed invalidation", "changed vs missing right", "cit/s ours", "cit/s git diff",
          "time ours / git diff"]


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


# ----------------------------------------------------------------------------- running


def run_ours(repo: Path, items: list[tuple[str, dict[str, Any]]], ref: str
             ) -> tuple[list[dict[str, Any]], float]:
    """``check_citations`` cold, in one process, as ``vmem citations check --jobs 1``
    would run: a new source, no grammar loaded, nothing parsed or read yet."""
    treesitter.default_index().clear()
    treesitter.unload_grammars()
    started = time.perf_counter()
    with LocalGitSource(repo) as source:
        try:
            results = [r.to_dict() for r in check_citations(source, items, ref, jobs=1)]
        except Exception:  # a verifier bug: find the citations that trigger it
            results = []
            for item in items:
                try:
                    results.extend(r.to_dict() for r in check_citations(source, [item], ref))
                except Exception as exc:
                    results.append({"id": item[0], "error": f"verifier crashed: {exc!r}"})
    return results, time.perf_counter() - started


def run_baseline(repo: Path, items: list[tuple[str, dict[str, Any]]], ref: str
                 ) -> tuple[list[dict[str, Any]], float]:
    started = time.perf_counter()
    results = check_with_diff(repo, items, ref)
    return results, time.perf_counter() - started


@dataclass
class Case:
    cite: sample.Cite
    label: labels.Label
    ours: dict[str, Any] = field(default_factory=dict)
    base: dict[str, Any] = field(default_factory=dict)


def collect(repo: Repo, path: Path, oracles: Oracles, rng: random.Random, args: Any,
            log: Callable[[str], None]) -> list[Case]:
    git = Git(path)
    snapshots: dict[str, labels.Snapshot] = {}

    def snapshot(commit: str) -> labels.Snapshot:
        if commit not in snapshots:
            if len(snapshots) > 8:
                snapshots.pop(next(iter(snapshots)))
            snapshots[commit] = labels.Snapshot(git, oracles, repo, commit)
        return snapshots[commit]

    cases: list[Case] = []
    try:
        for pair in sample.pairs(git, repo, rng, args.news, args.olds):
            cites = sample.citations(git, oracles, repo, pair, rng, args.per_pair)
            old, new = snapshot(pair.old), snapshot(pair.new)
            cases += [Case(c, labels.label(c, old, new)) for c in cites]
    finally:
        git.close()
    log(f"{repo.name}: {len(cases)} citations, "
        f"{Counter(c.label.category for c in cases).most_common()}")
    return cases


def check(path: Path, cases: list[Case], worker: Executor | None = None
          ) -> tuple[float, float]:
    """Both checkers over the cases, one run per new commit (in ``worker``, a process
    of its own, when given); their seconds."""
    ours_s = base_s = 0.0
    by_new: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        by_new[c.cite.new].append(c)
    for new, group in by_new.items():
        items = [(c.cite.id, {"id": c.cite.id, "path": c.cite.path,
                              "line_start": c.cite.start, "line_end": c.cite.end,
                              "sha": c.cite.old}) for c in group]
        if worker is None:
            (ours, seconds), (base, base_seconds) = (run_ours(path, items, new),
                                                     run_baseline(path, items, new))
        else:
            ours, seconds = worker.submit(run_ours, path, items, new).result()
            base, base_seconds = worker.submit(run_baseline, path, items, new).result()
        ours_s += seconds
        base_s += base_seconds
        for c, o, b in zip(group, ours, base, strict=True):
            c.ours, c.base = o, b
    return ours_s, base_s


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mirrors", type=Path,
                        help="directory of full-history clones (default: $VMEM_BENCH_MIRRORS)")
    parser.add_argument("--repos", help="comma-separated owner/name subset")
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--news", type=int, default=3, help="new commits per repository")
    parser.add_argument("--olds", type=int, default=5, help="old commits per new commit")
    parser.add_argument("--per-pair", type=int, default=40, help="citations per commit pair")
    parser.add_argument("--quick", action="store_true", help="2 x 3 pairs of 20 citations")
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                        / "verified-memory-bench" / "real_history")
    parser.add_argument("--out", type=Path, help="also write the tables to this file")
    parser.add_argument("--failures", type=Path,
                        help="write every wrong answer (ours and git diff) as JSON lines")
    parser.add_argument("--answers", type=Path,
                        help="write every answer of ours as JSON lines (to compare two runs)")
    args = parser.parse_args(argv)
    if args.quick:
        args.news, args.olds, args.per_pair = 2, 3, 20
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    root = mirrors_root(args.mirrors)
    if root is None:
        parser.error("give --mirrors DIR or set VMEM_BENCH_MIRRORS")
    wanted = {r.strip() for r in args.repos.split(",")} if args.repos else None
    oracles = Oracles(args.cache_dir, log)
    t0 = time.perf_counter()
    notes: list[str] = []
    per_repo: list[tuple[Repo, list[Case], float, float]] = []
    # the checks run in a process of their own, as `vmem citations check` would: not
    # in this one, whose heap the sampling and the oracles grow to gigabytes (checked
    # here, the same checks took 8-15% longer)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as worker:
        for repo in REPOS:
            if wanted is not None and repo.name not in wanted:
                continue
            path = find_mirror(root, repo.name)
            if path is None:
                notes.append(f"{repo.name}: no mirror under the mirrors directory; skipped")
                continue
            rng = random.Random(f"{args.seed}:{repo.name}")
            cases = collect(repo, path, oracles, rng, args, log)
            ours_s, base_s = check(path, cases, worker)
            log(f"{repo.name}: ours {ours_s:.1f} s, git diff {base_s:.1f} s")
            per_repo.append((repo, cases, ours_s, base_s))
    text = report(per_repo, notes, args, time.perf_counter() - t0)
    print(text)
    if args.out:
        args.out.write_text(text)
    if args.failures:
        with args.failures.open("w") as fh:
            for _, cases, _, _ in per_repo:
                for c in cases:
                    if c.label.expect not in SCORED:
                        continue
                    ours, base = judge(c.label, c.ours), judge(c.label, c.base)
                    if ours != "ok" or base != "ok":
                        fh.write(json.dumps({"ours": ours, "git_diff": base,
                                             "cite": asdict(c.cite), "label": asdict(c.label),
                                             "ours_said": c.ours, "git_diff_said": c.base})
                                 + "\n")
    if args.answers:
        with args.answers.open("w") as fh:
            for _, cases, _, _ in per_repo:
                for c in cases:
                    fh.write(json.dumps({"cite": c.cite.id, "expect": c.label.expect,
                                         "ours_said": c.ours}, sort_keys=True) + "\n")
    return 0


def report(per_repo: Sequence[tuple[Repo, list[Case], float, float]], notes: list[str],
           args: Any, seconds: float) -> str:
    by_lang: dict[str, tuple[Score, Score]] = {}
    by_repo_rows, lang_rows, kind_rows, category_rows = [], [], [], []
    grand = (Score(), Score())
    by_kind: dict[str, tuple[Score, Score]] = defaultdict(lambda: (Score(), Score()))
    categories: dict[str, list[Case]] = defaultdict(list)
    for repo, cases, ours_s, base_s in per_repo:
        ours = score((c.label, c.ours) for c in cases)
        base = score((c.label, c.base) for c in cases)
        ours.checked = base.checked = len(cases)
        ours.seconds, base.seconds = ours_s, base_s
        by_repo_rows.append([repo.name, repo.language, *cells(ours, base)])
        lang = by_lang.setdefault(repo.language, (Score(), Score()))
        for tot in (lang, grand):
            tot[0].add(ours)
            tot[1].add(base)
        for kind in ("definition", "window", "line"):
            sel = [c for c in cases if c.cite.kind == kind]
            by_kind[kind][0].add(score((c.label, c.ours) for c in sel))
            by_kind[kind][1].add(score((c.label, c.base) for c in sel))
        for c in cases:
            categories[c.label.category].append(c)
    lang_rows = [[lang, *cells(*pair)] for lang, pair in by_lang.items()]
    lang_rows.append(["**all**", *cells(*grand)])
    kind_rows = [[kind, *cells(*pair)[:6]] for kind, pair in by_kind.items()]
    for category in ("unchanged", "moved", "renamed", "reformatted", "changed", "gone",
                     "unclear"):
        group = categories.get(category, [])
        if not group:
            continue
        scored = category not in ("reformatted", "unclear")
        ours_ok = sum(judge(c.label, c.ours) == "ok" for c in group)
        base_ok = sum(judge(c.label, c.base) == "ok" for c in group)
        said = Counter(str(c.ours.get("status", "error")) for c in group)
        base_said = Counter(str(c.base.get("status", "error")) for c in group)
        category_rows.append([
            category, str(len(group)),
            pct(ours_ok, len(group)) if scored else NA,
            pct(base_ok, len(group)) if scored else NA,
            ", ".join(f"{k} {v}" for k, v in sorted(said.items())),
            ", ".join(f"{k} {v}" for k, v in sorted(base_said.items()))])
    pairs = sum(len({(c.cite.old, c.cite.new) for c in cases}) for _, cases, _, _ in per_repo)
    gaps = sorted(c.cite.gap for _, cases, _, _ in per_repo for c in cases)
    md = [
        "### Real histories: ours · git diff (same citations, same run)",
        "",
        table(["language", *HEADER], lang_rows),
        "",
        table(["repository", "language", *HEADER], by_repo_rows),
        "",
        table(["citation", *HEADER[:6]], kind_rows),
        "",
        table(["oracle label", "citations", "right (ours)", "right (git diff)", "ours said",
               "git diff said"], category_rows),
        "",
        f"Run: seed {args.seed}, {pairs} commit pairs (gaps {gaps[0] if gaps else 0}-"
        f"{gaps[-1] if gaps else 0} commits, median {gaps[len(gaps) // 2] if gaps else 0}), "
        f"{sum(len(c) for _, c, _, _ in per_repo)} citations, one process, cold per "
        f"(repository, new commit); {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f} at the end; {seconds:.0f} s in total.",
    ]
    if notes:
        md += ["", "Notes:", "", *(f"- {n}" for n in notes)]
    return "\n".join(md) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
