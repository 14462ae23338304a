"""The oracles: definitions and one-line declarations of a file, found by each
language's own parser, never by tree-sitter or anything in ``verified_memory``.

* Python: the standard library's ``ast`` (in this process);
* Go: ``go/ast`` (``oracles/go_oracle.go``, built once with Debian's ``golang-go``);
* JavaScript, TypeScript: the TypeScript compiler (``oracles/ts_oracle.js``, ``typescript``
  installed from npm into the cache directory);
* Java: javac's tree API, parse only (``oracles/JavaOracle.java``; any JDK 11+);
* Rust: rustc's own parser (``rust_oracle.py``: ``rustc -Z unpretty=ast-tree``, any
  rustc of 2025 or later).

Each answer is kept in ``facts.sqlite`` under the cache directory, keyed by the oracle's
version and the blob sha (blobs are immutable), so a re-run parses nothing again.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks.real_history import rust_oracle

__all__ = ["Decl", "Def", "Facts", "Oracles"]

HERE = Path(__file__).resolve().parent / "oracles"
TYPESCRIPT = "typescript@5.9.3"


@dataclass(frozen=True, slots=True)
class Def:
    name: str  # qualified: Class.method, Type.Method, Class.method(ParamTypes) in Java
    kind: str  # function | class | type
    start: int  # 1-based, inclusive
    end: int


@dataclass(frozen=True, slots=True)
class Decl:
    name: str  # qualified: CONSTANT, Class.field, Struct.Field
    line: int
    end: int  # the last line (a one-line declaration: ``line``)


@dataclass(frozen=True, slots=True)
class Facts:
    defs: tuple[Def, ...]
    decls: tuple[Decl, ...]
    ok: bool  # False: the file did not parse cleanly (its facts may be partial)

    def innermost(self, start: int, end: int) -> Def | None:
        inside = [d for d in self.defs if d.start <= start and end <= d.end]
        return min(inside, key=lambda d: (d.end - d.start, -d.start)) if inside else None


def _facts(data: Mapping[str, object]) -> Facts:
    defs = tuple(Def(str(d["name"]), str(d["kind"]), int(d["start"]), int(d["end"]))
                 for d in data.get("defs", []))  # type: ignore[union-attr]
    decls = tuple(Decl(str(d["name"]), int(d["line"]), int(d.get("end", d["line"])))
                  for d in data.get("decls", []))  # type: ignore[union-attr]
    return Facts(defs, decls, not data.get("error"))


# ----------------------------------------------------------------------------- python


def python_facts(text: str) -> dict[str, object]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        return {"defs": [], "decls": [], "error": str(exc)}
    defs: list[dict[str, object]] = []
    decls: list[dict[str, object]] = []

    def visit(body: list[ast.stmt], scope: str, in_class: bool, top: bool) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{scope}.{node.name}" if scope else node.name
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                defs.append({"name": name, "kind": kind, "start": start,
                             "end": node.end_lineno})
                visit(node.body, name, kind == "class", False)
                continue
            if (in_class or top) and isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name):
                    name = targets[0].id
                    decls.append({"name": f"{scope}.{name}" if scope else name,
                                  "line": node.lineno, "end": node.end_lineno})
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.AST):
                    # if/try at module or class level: still that level (not for decls)
                    visit([s for s in inner if isinstance(s, ast.stmt)]
                          if field != "handlers" else
                          [s for h in inner for s in getattr(h, "body", [])],
                          scope, False, False)

    visit(tree.body, "", False, True)
    return {"defs": defs, "decls": decls}


# ----------------------------------------------------------------------------- the others


class Oracles:
    """Facts per (language, blob), computed in batches by the language's oracle."""

    def __init__(self, cache_dir: Path, log: Callable[[str], None]) -> None:
        self.cache_dir = cache_dir
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.log = log
        self._db = sqlite3.connect(cache_dir / "facts.sqlite")
        self._db.execute("CREATE TABLE IF NOT EXISTS facts (oracle TEXT, blob TEXT, data TEXT,"
                         " PRIMARY KEY (oracle, blob))")
        self._memo: dict[tuple[str, str], Facts] = {}
        self._commands: dict[str, list[str]] = {}

    def version(self, language: str) -> str:
        source = {"python": Path(__file__), "go": HERE / "go_oracle.go",
                  "javascript": HERE / "ts_oracle.js", "typescript": HERE / "ts_oracle.js",
                  "tsx": HERE / "ts_oracle.js",
                  "java": HERE / "JavaOracle.java",
                  "rust": Path(rust_oracle.__file__)}[language]
        return f"{language}:" + hashlib.sha1(source.read_bytes()).hexdigest()[:12]

    def facts(self, language: str, texts: Mapping[str, str]) -> dict[str, Facts]:
        """Facts of each blob (blob sha -> text) of this language."""
        oracle = self.version(language)
        out: dict[str, Facts] = {}
        todo: dict[str, str] = {}
        for blob, text in texts.items():
            memo = self._memo.get((oracle, blob))
            if memo is not None:
                out[blob] = memo
            else:
                todo[blob] = text
        if todo:
            stored = dict(self._db.execute(
                f"SELECT blob, data FROM facts WHERE oracle = ? AND blob IN "
                f"({','.join('?' * len(todo))})", [oracle, *todo]).fetchall()) \
                if len(todo) < 900 else self._stored_many(oracle, todo)
            fresh = {b: t for b, t in todo.items() if b not in stored}
            computed = self._compute(language, fresh) if fresh else {}
            self._db.executemany("INSERT OR REPLACE INTO facts VALUES (?, ?, ?)",
                                 [(oracle, b, json.dumps(d)) for b, d in computed.items()])
            self._db.commit()
            for blob in todo:
                data = computed.get(blob)
                facts = _facts(data if data is not None else json.loads(stored[blob]))
                self._memo[(oracle, blob)] = out[blob] = facts
        return out

    def _stored_many(self, oracle: str, todo: Iterable[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        blobs = list(todo)
        for start in range(0, len(blobs), 800):
            chunk = blobs[start:start + 800]
            found.update(self._db.execute(
                f"SELECT blob, data FROM facts WHERE oracle = ? AND blob IN "
                f"({','.join('?' * len(chunk))})", [oracle, *chunk]).fetchall())
        return found

    def _compute(self, language: str, texts: Mapping[str, str]) -> dict[str, dict[str, object]]:
        if language == "python":
            return {blob: python_facts(text) for blob, text in texts.items()}
        if language == "rust":  # a rustc a file, two at a time
            with ThreadPoolExecutor(2) as pool:
                return dict(zip(texts, pool.map(rust_oracle.rust_facts, texts.values()),
                                strict=True))
        ext = {"go": ".go", "javascript": ".js", "typescript": ".ts", "tsx": ".tsx",
               "java": ".java"}[language]
        with tempfile.TemporaryDirectory(prefix="vmem-oracle-") as tmp:
            names: dict[str, str] = {}
            for blob, text in texts.items():
                path = os.path.join(tmp, blob + ext)
                with open(path, "w", encoding="utf-8", newline="") as fh:
                    fh.write(text)
                names[path] = blob
            listing = os.path.join(tmp, "files.txt")
            Path(listing).write_text("\n".join(names) + "\n", encoding="utf-8")
            command = self._command(language)
            if language == "java":
                proc = subprocess.run([*command, listing], capture_output=True, check=False)
            else:
                with open(listing, "rb") as stdin:
                    proc = subprocess.run(command, stdin=stdin, capture_output=True,
                                          check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"{language} oracle failed: "
                                   f"{proc.stderr.decode(errors='replace')[-2000:]}")
            out: dict[str, dict[str, object]] = {}
            for line in proc.stdout.decode("utf-8").splitlines():
                if line.strip():
                    data = json.loads(line)
                    out[names[data["file"]]] = data
        missing = set(texts) - set(out)
        if missing:
            raise RuntimeError(f"{language} oracle gave no answer for {len(missing)} files")
        return out

    # ------------------------------------------------------------------ tools

    def _command(self, language: str) -> list[str]:
        key = "ts" if language in ("javascript", "typescript", "tsx") else language
        if key not in self._commands:
            self._commands[key] = {"go": self._go, "ts": self._ts,
                                   "java": self._java}[key]()
        return self._commands[key]

    def _go(self) -> list[str]:
        binary = self.cache_dir / f"go_oracle-{self.version('go').split(':')[1]}"
        if not binary.exists():
            if shutil.which("go") is None:
                raise RuntimeError("the Go oracle needs Go: apt-get install golang-go")
            self.log("building the Go oracle (go/ast)")
            env = {**os.environ, "GO111MODULE": "off",
                   "GOCACHE": str(self.cache_dir / "gocache")}
            subprocess.run(["go", "build", "-o", str(binary), str(HERE / "go_oracle.go")],
                           check=True, env=env)
        return [str(binary)]

    def _ts(self) -> list[str]:
        prefix = self.cache_dir / "node"
        module = prefix / "node_modules" / "typescript"
        if not module.exists():
            if shutil.which("npm") is None:
                raise RuntimeError("the TypeScript oracle needs node and npm")
            self.log(f"installing {TYPESCRIPT} from npm (the TypeScript oracle)")
            prefix.mkdir(parents=True, exist_ok=True)
            subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund",
                            "--prefix", str(prefix), TYPESCRIPT], check=True)
        return ["node", str(HERE / "ts_oracle.js"), str(prefix / "node_modules")]

    def _java(self) -> list[str]:
        classes = self.cache_dir / f"java-{self.version('java').split(':')[1]}"
        if not (classes / "JavaOracle.class").exists():
            if shutil.which("javac") is None:
                raise RuntimeError("the Java oracle needs a JDK (javac)")
            self.log("compiling the Java oracle (javac tree API)")
            subprocess.run(["javac", "-d", str(classes), str(HERE / "JavaOracle.java")],
                           check=True)
        return ["java", "-cp", str(classes), "JavaOracle"]
