"""The memory folder in a repository (``.memory/`` by default): what goes where, how a
memory, a tombstone and an event are spelled in it, and reading it back strictly.

::

    .memory/
      index.md                          the memories by category (written, never read
                                        back but for the ids it lists: see ``listed``)
      <category>/<id>_<slug>.md         one memory: YAML front matter, then the fact and
                                        ``## Reason``
      _forgotten/<id>.md                a tombstone (front matter only)
      _events/YYYY/MM/DD/<actor>__<session>.jsonl
                                        telemetry, append-only, one file per actor and
                                        session (seed 001), so two writers never touch
                                        the same file
      .gitignore                        the SQLite index (rebuildable, never committed)
      .gitattributes                    index.md and the logs merge as a union

File names start with the memory's whole id (a hash of it when the id is not a safe
file name), so two writers never pick the same name; the slug after it is for people.
Every file is read as strictly as ``vmem store`` reads a memory (``store/records.py``),
and every error names the file and the field.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verified_memory.atomic import write_atomically
from verified_memory.errors import ValidationError
from verified_memory.gitstore import frontmatter
from verified_memory.limits import IMPORT_LINE_MAX, load_json, too_long
from verified_memory.models import Memory, TelemetryEvent, Tombstone
from verified_memory.prompt import sanitize_line
from verified_memory.store.records import read_event, read_memory, read_tombstone

__all__ = [
    "DEFAULT_FOLDER", "EVENTS", "EXPORT_SESSION", "FORGOTTEN", "INDEX", "Folder",
    "event_file", "event_line", "id_part", "looks_like_memory_folder", "memory_file",
    "parse_memory", "read_folder", "render_index", "render_memory", "render_tombstone",
    "support_files", "tombstone_file", "write_text",
]

DEFAULT_FOLDER = ".memory"
INDEX = "index.md"
EVENTS = "_events"
FORGOTTEN = "_forgotten"
#: The session name of the logs ``vmem git export`` writes (a store's whole telemetry).
EXPORT_SESSION = "export"
REASON_HEADING = "## Reason"
GITIGNORE = ("# The SQLite index is rebuilt from these files (vmem git reindex)\n"
             "index.sqlite*\nindex.state\n")
GITATTRIBUTES = ("# Two branches adding memories both list them: keep both sides' lines\n"
                 "index.md merge=union\n*.jsonl merge=union\n")
# No "_" in a safe id: it separates the id from the slug, so a file's id is never in doubt
# ("abc_x.md" is memory abc's, whatever other ids start with abc).
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,79}$")
_LISTED = re.compile(r"^- `([^`]+)`")
_REPOS = re.compile(r"^# Memories of (.+)$")
# The order of a memory's fields in its front matter: what people read first, first.
_ORDER = ("id", "repo", "subject", "category", "tags", "status", "created_by", "created_at",
          "refreshed_at", "used_at", "supersedes", "superseded_by", "verified_ref",
          "verified_commit", "invalid_reason", "verification_count", "applied_count",
          "success_count", "failure_count", "promoted_to", "citations")


def id_part(memory_id: str) -> str:
    """The start of a memory's file name: its id, or a hash of an id that is not a safe
    file name (an imported id may be anything)."""
    if _SAFE_ID.match(memory_id):
        return memory_id
    return "h" + hashlib.sha256(memory_id.encode()).hexdigest()[:32]


def _slug(text: str, limit: int = 48) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return slug or "memory"


def memory_file(memory: Memory) -> str:
    """Where a memory goes in the folder: ``<category>/<id>_<slug>.md``."""
    category = _slug(memory.category or "uncategorized", 64).replace("-", "_")
    return f"{category}/{id_part(memory.id)}_{_slug(memory.subject)}.md"


def _in_body(text: str | None) -> bool:
    """Whether text reads back unchanged from the body (else it goes in the front matter)."""
    if not text or text != text.strip() or "\r" in text:
        return False
    return not any(line.strip() == REASON_HEADING for line in text.splitlines())


def render_memory(memory: Memory) -> str:
    """A memory file: every field of ``Memory.to_dict`` (lossless), the fact and reason as
    the body when they read back unchanged from there."""
    data = memory.to_dict()
    fields = {key: data[key] for key in _ORDER}
    body = []
    for key in ("fact", "reason"):
        text = data[key]
        if text is None:
            continue
        if _in_body(text) and (key == "fact" or _in_body(data["fact"])):
            body.append(text if key == "fact" else f"{REASON_HEADING}\n\n{text}")
        else:
            fields[key] = text
    return frontmatter.dump(fields) + "".join(f"\n{part}\n" for part in body)


#: The lines git writes around a conflict it could not merge.
_CONFLICT = re.compile(r"^(<{7}|={7}|>{7}|\|{7})( |$)", re.MULTILINE)


def parse_memory(text: str, where: str) -> Memory:
    """A memory file read back, every field checked (``records.read_memory``).

    A citation's range edited by hand may leave more line hashes than it now has lines:
    they are dropped (the hashes of the old range; an import fingerprints an edited
    citation again at its ref)."""
    conflict = _CONFLICT.search(text)
    if conflict is not None:
        line = text.count("\n", 0, conflict.start()) + 1
        raise ValidationError(f"{where}: line {line}: a merge conflict marker "
                              f"({conflict.group(1)}): resolve the conflict first")
    lines, body = frontmatter.split(text, where)
    data = frontmatter.load(lines, where)
    for cite in data.get("citations") or ():
        if isinstance(cite, dict) and isinstance(cite.get("line_hashes"), list):
            start, end = cite.get("line_start"), cite.get("line_end")
            if (isinstance(start, int) and isinstance(end, int)
                    and len(cite["line_hashes"]) > end - start + 1):
                cite["line_hashes"] = []
    fact, heading, reason = body.partition(f"\n{REASON_HEADING}\n")
    if not heading and body.lstrip("\n").startswith(f"{REASON_HEADING}\n"):
        fact, reason, heading = "", body.lstrip("\n")[len(REASON_HEADING) + 1:], "x"
    for key, text_part in (("fact", fact), ("reason", reason if heading else "")):
        if text_part.strip():
            if key in data:
                raise ValidationError(f"{where}: {key} is given in the front matter and "
                                      "in the text")
            data[key] = text_part.strip()
    if "fact" not in data:
        raise ValidationError(f"{where}: fact is missing (the text after the front matter)")
    try:
        return read_memory(data)
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc}") from None


def render_tombstone(tombstone: Tombstone) -> str:
    return frontmatter.dump(tombstone.to_dict())


def parse_tombstone(text: str, where: str) -> Tombstone:
    lines, body = frontmatter.split(text, where)
    if body.strip():
        raise ValidationError(f"{where}: a forgotten memory keeps no text")
    try:
        return read_tombstone(frontmatter.load(lines, where))
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc}") from None


def tombstone_file(tombstone: Tombstone) -> str:
    return f"{FORGOTTEN}/{id_part(tombstone.id)}.md"


def event_file(event: TelemetryEvent, session: str) -> str:
    """``_events/YYYY/MM/DD/<actor>__<session>.jsonl``: the day the event happened."""
    actor = _slug(event.actor or "unknown", 64)
    return f"{EVENTS}/{event.at:%Y/%m/%d}/{actor}__{session}.jsonl"


def event_line(event: TelemetryEvent) -> str:
    """One event as a line: ``TelemetryEvent.to_dict`` without the store's own number,
    keys sorted (Postgres' jsonb does not keep a detail's order)."""
    record = event.to_dict()
    del record["id"]
    return json.dumps(record, ensure_ascii=False, sort_keys=True, allow_nan=False,
                      separators=(",", ":")) + "\n"


def render_index(memories: Sequence[Memory], repos: Iterable[str]) -> str:
    """``index.md``: every memory by category, active first, then by subject."""
    by_category: dict[str, list[Memory]] = {}
    for memory in memories:
        by_category.setdefault(memory.category or "uncategorized", []).append(memory)
    out = [f"# Memories of {', '.join(sorted(repos)) or 'no repository'}", "",
           "Written by `vmem git export`: one file per memory (YAML front matter, then the "
           "fact and its reason). Reword a fact or move a citation in a pull request and "
           "`vmem git import` supersedes the memory; delete its file and it is invalidated.",
           ""]
    for category in sorted(by_category):
        out += [f"## {category}", ""]
        ranked = sorted(by_category[category],
                        key=lambda m: (m.status.value != "active", m.subject.lower(), m.id))
        for memory in ranked:
            subject = sanitize_line(memory.subject).replace("[", "\\[").replace("]", "\\]")
            status = "" if memory.status.value == "active" else f" ({memory.status.value})"
            out.append(f"- `{id_part(memory.id)}` [{subject}](<{memory_file(memory)}>)"
                       f"{status}")
        out.append("")
    return "\n".join(out)


def support_files() -> dict[str, str]:
    return {".gitignore": GITIGNORE, ".gitattributes": GITATTRIBUTES}


def looks_like_memory_folder(folder: Path, *more: str) -> bool:
    """Whether ``folder`` (which exists) is empty or holds what a memory folder holds
    (``index.md``, ``_events/``, ``_forgotten/``, the ``.gitignore`` or
    ``.gitattributes`` written here, or any of ``more``): a command that only reads must
    not turn a folder of code, named by mistake, into one. A folder that cannot be
    listed is left to the caller's own error."""
    try:
        if not any(folder.iterdir()):
            return True
        if any((folder / name).exists() for name in (INDEX, EVENTS, FORGOTTEN, *more)):
            return True
        for name, text in support_files().items():
            path = folder / name
            if path.is_file() and path.read_text(encoding="utf-8", errors="replace") == text:
                return True
    except OSError:
        return True
    return False


def write_text(path: Path, text: str) -> bool:
    """Write ``text`` atomically, only if it differs (a re-run leaves files untouched);
    whether it was written."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text)  # a file of the repository: the umask decides, as git's
    return True


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class Folder:
    """A memory folder, read whole and checked: nothing is written yet."""

    memories: Mapping[str, Memory] = field(default_factory=dict)  # by file, relative
    events: tuple[TelemetryEvent, ...] = ()  # in the order they happened
    tombstones: tuple[Tombstone, ...] = ()
    listed: frozenset[str] = frozenset()  # id parts index.md lists
    repos: tuple[str, ...] = ()  # as index.md names them
    files: frozenset[str] = frozenset()  # every memory, tombstone and log file, relative
    #: Keys of the events logged by sessions of the repository store (not by an export).
    session_keys: frozenset[str | None] = frozenset()

    def memory_ids(self) -> dict[str, str]:
        """Each memory's id and the file it is in."""
        return {memory.id: path for path, memory in self.memories.items()}


def _read(path: Path, where: str) -> str:
    with path.open(encoding="utf-8", newline="") as fh:
        text = fh.read(IMPORT_LINE_MAX + 1)
    if len(text) > IMPORT_LINE_MAX:
        raise ValidationError(f"{where} is longer than {IMPORT_LINE_MAX:,} characters")
    return text


def read_folder(folder: Path) -> Folder:
    """Read every memory, tombstone and event of ``folder`` (``ValidationError`` naming
    the first bad file and field; a missing folder is an empty one)."""
    memories: dict[str, Memory] = {}
    tombstones: list[Tombstone] = []
    timed: list[tuple[Any, str, int, TelemetryEvent]] = []
    session_keys: set[str | None] = set()
    files: set[str] = set()
    if not folder.is_dir():
        return Folder()
    seen: dict[str, str] = {}
    # Where each event key was first read: the same event may reach the folder through
    # two logs (a session's, and a teammate's export of a store that imported it, from
    # two branches merged since), or twice in one (a line repeated by hand).
    keyed: dict[str, tuple[str, int, TelemetryEvent]] = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if not path.is_file() or relative.startswith(".") or "/." in relative:
            continue
        where = f"{folder.name}/{relative}"
        try:
            if relative.startswith(f"{EVENTS}/"):
                if relative.endswith(".jsonl"):
                    exported = relative.endswith(f"__{EXPORT_SESSION}.jsonl")
                    for number, event in _events(path, where):
                        if not exported:
                            session_keys.add(event.key)
                        if event.key is not None:
                            first = keyed.setdefault(event.key, (where, number, event))
                            if first[2] is not event:
                                if first[2] == event:
                                    continue  # one event, read once
                                raise ValidationError(
                                    f"{where}: line {number}: event key {event.key} is "
                                    f"also on line {first[1]} of {first[0]}, with other "
                                    "contents")
                        timed.append((event.at, relative, number, event))
                    files.add(relative)
            elif relative.startswith(f"{FORGOTTEN}/"):
                if relative.endswith(".md"):
                    tombstones.append(parse_tombstone(_read(path, where), where))
                    files.add(relative)
            elif relative.endswith(".md") and relative.count("/") == 1:
                memory = parse_memory(_read(path, where), where)
                if not path.name.startswith(f"{id_part(memory.id)}_"):
                    # an id edited by hand would import as a new memory and drop the old
                    raise ValidationError(
                        f"{where}: id {memory.id} is not the one the file is named by "
                        "(file names start with their memory's id): an id cannot be edited")
                if memory.id in seen:
                    raise ValidationError(f"{where}: memory {memory.id} is also in "
                                          f"{folder.name}/{seen[memory.id]}")
                seen[memory.id] = relative
                memories[relative] = memory
                files.add(relative)
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{where}: not UTF-8 text ({exc.reason})") from None
    listed, repos = _index(folder / INDEX)
    timed.sort(key=lambda t: (t[0], t[1], t[2]))
    return Folder(memories=memories, events=tuple(t[3] for t in timed),
                  tombstones=tuple(tombstones), listed=listed, repos=repos,
                  files=frozenset(files), session_keys=frozenset(session_keys))


def _events(path: Path, where: str) -> Iterable[tuple[int, TelemetryEvent]]:
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if too_long(line, IMPORT_LINE_MAX):
                raise ValidationError(f"{where}: line {number} is too long")
            if not line.strip():
                continue
            record = load_json(line, f"{where}: line {number}")
            if not isinstance(record, dict):
                raise ValidationError(f"{where}: line {number}: expected an event object")
            try:
                yield number, read_event(record)
            except ValidationError as exc:
                raise ValidationError(f"{where}: line {number}: {exc}") from None


def _index(path: Path) -> tuple[frozenset[str], tuple[str, ...]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return frozenset(), ()
    listed = {m.group(1) for m in map(_LISTED.match, text.splitlines()) if m}
    repos: tuple[str, ...] = ()
    first = _REPOS.match(text.split("\n", 1)[0])
    if first:
        repos = tuple(r.strip() for r in first.group(1).split(","))
    return frozenset(listed), repos
