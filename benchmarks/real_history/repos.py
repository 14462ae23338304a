"""The repositories of the benchmark, and where their mirrors are.

Nothing third-party is committed: each run reads full-history clones (bare or not) from a
directory given with ``--mirrors DIR`` or ``VMEM_BENCH_MIRRORS``. A repository
``owner/name`` is looked for there as ``owner+name/repo``, ``owner+name``, ``owner/name``,
``name`` or ``name.git``; one that is not found is skipped, with a note in the results.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FAMILY", "REPOS", "Repo", "find_mirror", "mirrors_root"]


@dataclass(frozen=True, slots=True)
class Repo:
    name: str  # owner/name on GitHub
    language: str  # the oracle's language
    extensions: tuple[str, ...]
    #: Paths whose first appearance on the main line marks a restructuring (a ``src/``
    #: layout, modules made private, a package moved): one commit pair always spans it.
    spans: tuple[str, ...] = ()


REPOS: tuple[Repo, ...] = (
    Repo("pallets/flask", "python", (".py",),
         ("src/flask/__init__.py", "src/flask/sansio/app.py")),
    Repo("encode/httpx", "python", (".py",), ("httpx/_models.py",)),
    Repo("psf/requests", "python", (".py",), ("src/requests/__init__.py",)),
    Repo("pallets/click", "python", (".py",), ("src/click/__init__.py",)),
    Repo("encode/starlette", "python", (".py",)),
    Repo("fastapi/typer", "python", (".py",)),
    Repo("gin-gonic/gin", "go", (".go",), ("internal/json/json.go",)),
    Repo("urfave/cli", "go", (".go",)),
    Repo("spf13/cobra", "go", (".go",)),
    Repo("axios/axios", "javascript", (".js", ".cjs", ".mjs")),
    Repo("expressjs/express", "javascript", (".js",)),
    Repo("colinhacks/zod", "typescript", (".ts",), ("packages/zod/src/v3/types.ts",)),
    Repo("google/gson", "java", (".java",)),
    Repo("FasterXML/jackson-databind", "java", (".java",)),
    Repo("BurntSushi/ripgrep", "rust", (".rs",), ("crates/core/main.rs",)),
    Repo("sharkdp/fd", "rust", (".rs",)),
    Repo("pallets/werkzeug", "python", (".py",), ("src/werkzeug/__init__.py",)),
    Repo("go-chi/chi", "go", (".go",)),
    Repo("actions/setup-python", "typescript", (".ts",)),
    Repo("actions/checkout", "typescript", (".ts",)),
    Repo("spring-projects/spring-framework", "java", (".java",)),
)


#: Extensions of each language family: code moves between them (``karma.conf.js`` ->
#: ``karma.conf.cjs``, JavaScript to TypeScript), so the oracle looks at all of them.
FAMILY: dict[str, dict[str, str]] = {
    "python": {".py": "python", ".pyi": "python"},
    "go": {".go": "go"},
    "java": {".java": "java"},
    "rust": {".rs": "rust"},
    "javascript": {".js": "javascript", ".cjs": "javascript", ".mjs": "javascript",
                   ".jsx": "javascript", ".ts": "typescript", ".mts": "typescript",
                   ".cts": "typescript", ".tsx": "tsx"},
}
FAMILY["typescript"] = FAMILY["javascript"]


def find_mirror(root: Path, name: str) -> Path | None:
    owner, short = name.split("/")
    for candidate in (root / f"{owner}+{short}" / "repo", root / f"{owner}+{short}",
                      root / owner / short, root / short, root / f"{short}.git"):
        if (candidate / "HEAD").exists() or (candidate / ".git").exists():
            return candidate
    return None


def mirrors_root(given: Path | None) -> Path | None:
    if given is not None:
        return given
    env = os.environ.get("VMEM_BENCH_MIRRORS")
    return Path(env) if env else None
