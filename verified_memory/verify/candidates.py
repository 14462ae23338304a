"""Where code that left its file may be now: the files that continue the cited file
(its successors), then the other files worth searching, all of the cited file's kind.

Git pairs a deleted file with an added one as a rename only when their contents are at
least half the same. Real projects move files while editing them: a ``src/`` layout
adopted in the same stretch of history as a refactor, modules made private
(``models.py`` -> ``_models.py``), a package renamed or moved into a monorepo
(``src/types.ts`` -> ``packages/zod/src/v3/types.ts``), a module split into a package
(``util.py`` -> ``util/url.py``). So when the cited file is gone and git saw no rename,
the changed files that name the same module (the same file name, private or not, in
any folder; or a file inside a package named after the module) and hold enough of the
old file's lines are its successors: code found there is the cited code, moved with
its file, and a definition found there edited is ``changed`` there, not ``missing``.

Code never moves into a file of another kind: a Go function deleted from a ``.go``
file is not "relocated" into the code example of a markdown guide. Only files of the
cited file's language are searched (JavaScript and TypeScript count as one), or, for a
file no grammar covers, files with its extension. Nor does it move into what a build
writes or a package manager brings (``dist/``, ``build/``, ``node_modules/``,
``vendor/``, minified bundles): a TypeScript action's ``src/`` is compiled into
``dist/index.js`` at every release, where its lines read the same. Such files are
searched only for code cited in such a file.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Collection, Mapping, Sequence
from itertools import chain

from verified_memory.anchors import treesitter
from verified_memory.anchors.hashing import BLANK
from verified_memory.verify.files import FileCache, FileText

__all__ = ["MAX_CANDIDATES", "ChangedFiles", "kind_suffixes", "same_kind", "successors"]

#: Candidate files searched for a moved citation, at most (successors, then nearest paths).
#: A citation of code that is gone passes over every one (two scans of each one's text).
#: Over the real-history benchmark's 12,920 citations the farthest answer came from the
#: 165th candidate and the farthest one scored right from the 98th; 400 candidates
#: (where this stood before) gave the same answers, and Java's runs took 8% longer.
MAX_CANDIDATES = 200
#: A file that names the cited module is its successor when it holds at least this share
#: of the old file's distinct code lines...
_SUCCESSOR_SHARE = 0.25
#: ... or, for the cited path itself under other folders (``src/pkg/core.py`` for
#: ``pkg/core.py``), this share (a package's ``__init__.py`` rewritten on the way)...
_SAME_PATH_SHARE = 0.1
#: ... or when this share of its own lines come from the old file (a part of a module
#: split into a package), and at least ``_SUCCESSOR_LINES`` of them.
_PART_SHARE = 0.5
_SUCCESSOR_LINES = 5
_FAMILIES = {"typescript": "javascript", "tsx": "javascript"}
#: The file endings of each language family.
_SUFFIXES: dict[str, tuple[str, ...]] = {}
for _suffix, _language in sorted(treesitter.extensions().items()):
    _family = _FAMILIES.get(_language, _language)
    _SUFFIXES[_family] = (*_SUFFIXES.get(_family, ()), _suffix)
#: Folders a build writes or a package manager fills, and bundled files: not where code
#: moves (see the module's docstring).
_BUILT_FOLDERS = frozenset({"dist", "build", "node_modules", "vendor"})
_BUNDLES = tuple(f".{kind}.{ext}" for kind in ("min", "bundle") for ext in ("js", "cjs", "mjs"))


def _built(path: str) -> bool:
    """Whether ``path`` is in a folder a build writes or a package manager fills, or is a
    bundle (asked of every file a diff changed: string tests, not a pattern)."""
    return path.endswith(_BUNDLES) or not _BUILT_FOLDERS.isdisjoint(path.split("/")[:-1])


def _kind(path: str) -> str:
    language = treesitter.language_for(path)
    if language is not None:
        return _FAMILIES.get(language, language)
    return "." + os.path.splitext(path)[1].lower()


def kind_suffixes(cited: str) -> tuple[str, ...] | None:
    """The endings of the files of ``cited``'s language family (``(".py", ".pyi")``), among
    which its renames are looked for: code moves into no other kind. None (every file)
    for a file no grammar covers: a document renamed to another extension
    (``.md`` -> ``.mdx``) is still the cited one."""
    kind = _kind(cited)
    if kind.startswith("."):
        return None
    return _SUFFIXES[kind]


def same_kind(cited: str, path: str) -> bool:
    """Whether code cited in ``cited`` may have moved to ``path``: same language (or
    family), or, without a grammar, the same extension."""
    return _kind(cited) == _kind(path)


def _module(path: str) -> tuple[list[str], str]:
    """A path's folders and its file name without extension or leading underscores, in
    lower case (``buildUrl.js`` -> ``helpers/buildURL.js`` is the same module)."""
    parts = path.lower().split("/")
    stem = os.path.splitext(parts[-1])[0].lstrip("_")
    return [p.lstrip("_") for p in parts[:-1]], stem


def _names_module(cited: str, path: str) -> int:
    """How surely ``path`` names the cited module: 2 when it is the cited path, private
    or not, under more folders (``src/``, ``packages/b/``) or fewer; 1 for the same file
    name in another folder, or a file inside a package named after the module; else 0."""
    folders, stem = _module(cited)
    new_folders, new_stem = _module(path)
    same_ext = os.path.splitext(cited)[1].lower() == os.path.splitext(path)[1].lower()
    if new_stem == stem and same_ext:
        shorter, longer = sorted((folders, new_folders), key=len)
        return 2 if longer[len(longer) - len(shorter):] == shorter else 1
    return 1 if stem and stem in new_folders else 0


def _common_tail(a: str, b: str) -> int:
    """How many trailing folders two paths share (``flask/json`` and ``src/flask/json``
    share two)."""
    x, y = a.split("/")[:-1], b.split("/")[:-1]
    n = 0
    while n < min(len(x), len(y)) and x[-1 - n].lstrip("_") == y[-1 - n].lstrip("_"):
        n += 1
    return n


class ChangedFiles:
    """The files added or changed between two commits, indexed once for the searches of
    every citation made at the older one: by kind (sorted by path), by file name and by
    folder name. A big repository's long gap changes thousands of files; each citation
    then costs a few look-ups and the part of the list it searches, not a pass over it."""

    def __init__(self, changed: Collection[str]) -> None:
        self._by_kind: dict[str, list[str]] = {}
        self._built = {path for path in changed if _built(path)}
        of_extension: dict[str, str] = {}  # a path's kind is its extension's
        for path in sorted(changed):
            extension = os.path.splitext(path)[1]
            found = of_extension.get(extension)
            if found is None:
                found = of_extension[extension] = _kind(path)
            self._by_kind.setdefault(found, []).append(path)
        self._by_name: dict[str, tuple[dict[str, list[str]], dict[str, list[str]]]] = {}

    def _named(self, cited: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """The files of the cited file's kind by file name and by folder name, indexed
        when a cited file of that kind is gone (``naming``, the one question that needs
        them)."""
        kind = _kind(cited)
        index = self._by_name.get(kind)
        if index is None:
            by_stem: dict[str, list[str]] = {}
            by_folder: dict[str, list[str]] = {}
            for path in self._by_kind.get(kind, ()):
                folders, stem = _module(path)
                by_stem.setdefault(stem, []).append(path)
                for folder in set(folders):
                    by_folder.setdefault(folder, []).append(path)
            index = self._by_name[kind] = (by_stem, by_folder)
        return index

    def naming(self, cited: str) -> dict[str, int]:
        """Files of the cited file's kind that name its module (``_names_module``)."""
        by_stem, by_folder = self._named(cited)
        _, stem = _module(cited)
        skip = self._built if not _built(cited) else frozenset()
        found = {p: how for p in [*by_stem.get(stem, ()), *by_folder.get(stem, ())]
                 if p not in skip and (how := _names_module(cited, p))}
        found.pop(cited, None)
        return found

    def ordered(self, cited: str, first: Sequence[str]) -> list[str]:
        """The files to search, at most ``MAX_CANDIDATES``: ``first`` (the successors),
        then the changed files of the cited file's kind (not built ones, unless the
        cited file is one), those in the cited file's folder first, then in its parent
        folder's, and so on, by path."""
        paths = self._by_kind.get(_kind(cited), [])
        out = list(first)
        seen = {cited, *first}
        skip = self._built if not _built(cited) else frozenset()
        folders = cited.split("/")[:-1]
        inner = range(0)  # the paths under the folder searched before, passed over again
        for depth in range(len(folders), -1, -1):
            # the paths under a folder are a run of the sorted list: ``a/b/`` up to ``a/b0``
            prefix = "/".join(folders[:depth])
            start = bisect_left(paths, prefix + "/") if depth else 0
            end = bisect_left(paths, prefix + "0", start) if depth else len(paths)
            for at in chain(range(start, inner.start), range(inner.stop, end)) \
                    if inner else range(start, end):
                path = paths[at]
                if path not in seen and path not in skip:
                    seen.add(path)
                    out.append(path)
                    if len(out) >= MAX_CANDIDATES:
                        return out
            inner = range(start, end)
        return out


def successors(cited: str, old: FileText | None, changed: ChangedFiles,
               tree: Mapping[str, str], renamed: Mapping[str, str],
               files: FileCache) -> list[str]:
    """The files that continue ``cited`` at the revision, best first: git's rename of it;
    else, when it is gone, changed files that name the same module and hold enough of
    its old lines (``old``; none without it). Reads only those files."""
    first = renamed.get(cited)
    if first is not None and first in tree:
        return [first]
    if cited in tree or old is None:
        return []
    named = {p: how for p, how in changed.naming(cited).items() if p in tree}
    if not named:
        return []
    before = {h for h in old.hashes if h != BLANK}
    if not before:
        return []
    files.prefetch(tree[p] for p in named)
    scored: list[tuple[float, int, str]] = []
    for path, how in named.items():
        new = files.get(tree[path])
        if new is None:
            continue
        after = {h for h in new.hashes if h != BLANK}
        shared = len(before & after)
        share = shared / len(before)
        if share >= (_SUCCESSOR_SHARE if how == 1 else _SAME_PATH_SHARE) or (
                shared >= _SUCCESSOR_LINES and shared / max(len(after), 1) >= _PART_SHARE):
            scored.append((-share, -_common_tail(cited, path), path))
    return [path for _, _, path in sorted(scored)]
