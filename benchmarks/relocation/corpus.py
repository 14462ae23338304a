"""Where the real source files come from: this machine first, a package registry second.

Nothing third-party is committed to this repository. Each run copies real files from:

* Python: the interpreter's standard library and the virtualenv's site-packages;
* JavaScript: npm's global ``node_modules`` (``npm root -g``) and ``/usr/share/nodejs``;
* TypeScript and TSX: ``.ts``/``.tsx`` sources found in those folders, else npm packages
  that ship their TypeScript sources, fetched with ``npm pack`` into the cache folder;
* Go: a GOROOT (``go env GOROOT``, ``/usr/local/go``, ``/usr/lib/go*``), else Debian's
  ``golang-*-src`` package fetched with ``apt-get download`` (not installed);
* Rust: rustup's ``rust-src`` component or ``~/.cargo/registry/src``, else Debian's
  ``librust-*-dev`` packages (crate sources) fetched with ``apt-get download``;
* Java: the JDK's ``lib/src.zip``.

Downloads land in a cache folder outside the repository (``--cache-dir``), so a second run
reads them from disk. Files are sampled with a seeded RNG, so a run is reproducible for a
given seed and machine.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import sysconfig
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LANGUAGES", "Corpus", "SourceFile", "collect"]

#: Language -> file extensions sampled for it.
LANGUAGES: dict[str, tuple[str, ...]] = {
    "python": (".py",),
    "javascript": (".js", ".mjs", ".cjs"),
    "typescript": (".ts",),
    "tsx": (".tsx",),
    "go": (".go",),
    "rust": (".rs",),
    "java": (".java",),
}

#: npm packages that ship TypeScript sources (``src/**/*.ts`` and ``.tsx``), pinned.
NPM_TS_PACKAGES = ("rxjs@7.8.2", "zod@4.6.7", "@tanstack/query-core@5.108.0",
                   "@tanstack/react-router@1.170.46", "@tanstack/react-query@5.108.0")
#: Debian packages with Go sources (the standard library) and Rust crate sources.
APT_GO_PACKAGES = ("golang-1.19-src",)
APT_RUST_PACKAGES = ("librust-tokio-dev", "librust-regex-dev", "librust-serde-dev",
                     "librust-clap-dev")

MIN_LINES = 60
MAX_LINES = 2500
MAX_LINE_LENGTH = 200
_SKIP_DIRS = frozenset({"test", "tests", "testdata", "__tests__", "__pycache__", "fixtures",
                        "idlelib", "lib2to3", "dist", "esm", "cjs", "umd", "bundles"})


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One real file: its path in the benchmark repository and its lines (LF, no BOM)."""

    language: str
    path: str
    lines: tuple[str, ...]
    origin: str  # where it was copied from, for the report


@dataclass(frozen=True, slots=True)
class _Candidate:
    path: str
    read: Callable[[], bytes]
    origin: str


@dataclass
class Corpus:
    """The sampled files per language, and a line per source used (for the README)."""

    files: dict[str, list[SourceFile]]
    sources: dict[str, list[str]]


def collect(languages: list[str], per_language: int, rng: random.Random,
            cache_dir: Path, log: Callable[[str], None] = print) -> Corpus:
    """Sample up to ``per_language`` usable files per language (more are kept as spares:
    the edit stage needs files with enough definitions and skips the rest)."""
    files: dict[str, list[SourceFile]] = {}
    sources: dict[str, list[str]] = {}
    for language in languages:
        candidates = _clustered(list(_candidates(language, cache_dir, log)), rng)
        seen: set[str] = set()
        chosen: list[SourceFile] = []
        used: set[str] = set()
        for cand in candidates:
            if len(chosen) >= per_language:
                break
            lines = _usable(cand)
            if lines is None:
                continue
            digest = hashlib.sha1("\n".join(lines).encode(), usedforsecurity=False).hexdigest()
            if digest in seen or cand.path in {f.path for f in chosen}:
                continue
            seen.add(digest)
            chosen.append(SourceFile(language, cand.path, lines, cand.origin))
            used.add(cand.origin)
        files[language] = chosen
        sources[language] = sorted(used)
        log(f"corpus: {language}: {len(chosen)} files sampled from {len(candidates)} "
            f"candidates ({', '.join(sorted(used)) or 'none found'})")
    return Corpus(files, sources)


def _clustered(candidates: list[_Candidate], rng: random.Random) -> list[_Candidate]:
    """Random folders, up to three random files from each: a repository's files come in
    packages, and code moves between neighbours (the edits pair files of one folder)."""
    folders: dict[str, list[_Candidate]] = {}
    for cand in candidates:
        folders.setdefault(cand.path.rsplit("/", 1)[0], []).append(cand)
    names = sorted(folders)
    rng.shuffle(names)
    first: list[_Candidate] = []
    rest: list[_Candidate] = []
    for name in names:
        group = folders[name]
        rng.shuffle(group)
        first.extend(group[:3])
        rest.extend(group[3:])
    rng.shuffle(rest)
    return first + rest


def _usable(cand: _Candidate) -> tuple[str, ...] | None:
    try:
        data = cand.read()
    except OSError:
        return None
    if b"\x00" in data or b"\r" in data:
        return None  # binary, or CRLF/CR already (the CRLF edit adds it on purpose)
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not MIN_LINES <= len(lines) <= MAX_LINES:
        return None
    if max(len(line) for line in lines) > MAX_LINE_LENGTH:
        return None  # minified or generated
    head = "\n".join(lines[:8])
    if "DO NOT EDIT" in head or "@generated" in head or "auto-generated" in head.lower():
        return None
    # \f and other separators would number lines differently in different tools
    if any(ch in text for ch in "\f\v\x1c\x1d\x1e\x85\u2028\u2029"):
        return None
    return tuple(line.rstrip() if line.endswith((" ", "\t")) and not line.strip() else line
                 for line in lines)


# ----------------------------------------------------------------------------- finders


def _candidates(language: str, cache_dir: Path, log: Callable[[str], None]
                ) -> Iterator[_Candidate]:
    exts = LANGUAGES[language]
    if language == "python":
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        yield from _walk(stdlib, exts, "cpython/Lib", "python stdlib",
                         skip={"site-packages", "dist-packages", "ensurepip", "pydoc_data"})
        purelib = Path(sysconfig.get_paths()["purelib"])
        yield from _walk(purelib, exts, "site-packages", "virtualenv site-packages",
                         skip={"pip", "setuptools", "_distutils_hack", "pkg_resources"})
    elif language == "javascript":
        for root in _node_roots():
            yield from _walk(root, exts, "node_modules", f"npm global ({root})")
    elif language in ("typescript", "tsx"):
        found = [c for root in _node_roots()
                 for c in _walk(root, exts, "node_modules", f"npm global ({root})")
                 if not c.path.endswith(".d.ts")]
        if len(found) < 30:
            for spec, root in _npm_packs(cache_dir, log):
                found.extend(c for c in _walk(root / "src", exts, f"{_pkg_name(spec)}/src",
                                              f"npm pack {spec}")
                             if not c.path.endswith(".d.ts"))
        yield from found
    elif language == "go":
        roots = _goroots()
        if roots:
            for root in roots:
                yield from _walk(root, exts, "go/src", f"GOROOT {root}", go=True)
        else:
            extracted = _apt_extract(APT_GO_PACKAGES, cache_dir / "apt-go", log)
            for src in sorted(extracted.glob("usr/share/go-*/src")) if extracted else []:
                yield from _walk(src, exts, "go/src", f"apt-get download {APT_GO_PACKAGES[0]}",
                                 go=True)
    elif language == "rust":
        roots = _rust_roots()
        if roots:
            for root in roots:
                yield from _walk(root, exts, "rust", f"rust sources {root}")
        else:
            extracted = _apt_extract(APT_RUST_PACKAGES, cache_dir / "apt-rust", log)
            registry = extracted / "usr/share/cargo/registry" if extracted else None
            if registry is not None and registry.is_dir():
                for crate in sorted(registry.iterdir()):
                    yield from _walk(crate, exts, f"crates/{crate.name}",
                                     f"apt-get download librust-{crate.name.rsplit('-', 1)[0]}-dev")
    elif language == "java":
        yield from _java()


def _walk(root: Path, exts: tuple[str, ...], prefix: str, origin: str,
          skip: set[str] | frozenset[str] = frozenset(), go: bool = False
          ) -> Iterator[_Candidate]:
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and d not in skip
                             and not d.startswith("."))
        for name in sorted(filenames):
            if not name.endswith(exts) or name.endswith((".min.js", ".d.ts")):
                continue
            if go and name.endswith("_test.go"):
                continue
            if name.startswith(("test_", "conftest")) or ".test." in name or ".spec." in name:
                continue
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            yield _Candidate(f"{prefix}/{rel}", full.read_bytes, origin)


def _node_roots() -> list[Path]:
    roots: list[Path] = []
    npm = shutil.which("npm")
    if npm:
        proc = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            roots.append(Path(proc.stdout.strip()))
    for extra in ("/usr/lib/node_modules", "/usr/share/nodejs", "/usr/local/lib/node_modules"):
        path = Path(extra)
        if path.is_dir() and all(path.resolve() != r.resolve() for r in roots):
            roots.append(path)
    return [r for r in roots if r.is_dir()]


def _pkg_name(spec: str) -> str:
    name = spec.rsplit("@", 1)[0] if spec.count("@") > spec.startswith("@") else spec
    return name.lstrip("@").replace("/", "-")


def _npm_packs(cache_dir: Path, log: Callable[[str], None]) -> list[tuple[str, Path]]:
    """``npm pack`` each TypeScript package into the cache (once) and unpack it."""
    out: list[tuple[str, Path]] = []
    npm = shutil.which("npm")
    base = cache_dir / "npm"
    for spec in NPM_TS_PACKAGES:
        target = base / _pkg_name(spec)
        if not (target / "package").is_dir():
            if npm is None:
                continue
            target.mkdir(parents=True, exist_ok=True)
            log(f"corpus: npm pack {spec} (into {target})")
            proc = subprocess.run([npm, "pack", spec, "--silent", "--pack-destination",
                                   str(target)], capture_output=True, text=True, check=False)
            tgz = sorted(target.glob("*.tgz"))
            if proc.returncode != 0 or not tgz:
                log(f"corpus: npm pack {spec} failed: {proc.stderr.strip()[:200]}")
                continue
            with tarfile.open(tgz[0]) as tar:
                tar.extractall(target, filter="data")
        out.append((spec, target / "package"))
    return out


def _goroots() -> list[Path]:
    roots: list[Path] = []
    go = shutil.which("go")
    if go:
        proc = subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True,
                              check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            roots.append(Path(proc.stdout.strip()) / "src")
    roots.append(Path("/usr/local/go/src"))
    roots.extend(sorted(Path("/usr/lib").glob("go*/src")))
    unique: list[Path] = []
    for r in roots:
        if r.is_dir() and r.resolve() not in [u.resolve() for u in unique]:
            unique.append(r)
    return unique[:1]


def _rust_roots() -> list[Path]:
    home = Path.home()
    roots = sorted(home.glob(".rustup/toolchains/*/lib/rustlib/src/rust/library"))[:1]
    roots += sorted(home.glob(".cargo/registry/src/*"))[:1]
    return [r for r in roots if r.is_dir()]


def _apt_extract(packages: tuple[str, ...], target: Path,
                 log: Callable[[str], None]) -> Path | None:
    """``apt-get download`` the packages into ``target`` and unpack them (no install)."""
    root = target / "root"
    done = target / ".done"
    if done.exists():
        return root
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        return None
    target.mkdir(parents=True, exist_ok=True)
    for package in packages:
        log(f"corpus: apt-get download {package} (into {target})")
        proc = subprocess.run(["apt-get", "download", "-q", package], cwd=target,
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            log(f"corpus: apt-get download {package} failed: {proc.stderr.strip()[:200]}")
    debs = sorted(target.glob("*.deb"))
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=False,
                       capture_output=True)
    if not debs:
        return None
    done.touch()
    return root


def _java() -> Iterator[_Candidate]:
    zips: list[Path] = []
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        zips.append(Path(java_home) / "lib/src.zip")
    javac = shutil.which("javac")
    if javac:
        zips.append(Path(javac).resolve().parent.parent / "lib/src.zip")
    zips.extend(sorted(Path("/usr/lib/jvm").glob("*/lib/src.zip")))
    for path in zips:
        if path.is_file():
            real = path.resolve()
            archive = zipfile.ZipFile(real)
            for name in sorted(archive.namelist()):
                base = name.rsplit("/", 1)[-1]
                if not name.endswith(".java") or base in ("module-info.java",
                                                          "package-info.java"):
                    continue

                def read(name: str = name, archive: zipfile.ZipFile = archive) -> bytes:
                    return archive.read(name)

                yield _Candidate(f"jdk/{name}", read, f"JDK src.zip ({real})")
            return
