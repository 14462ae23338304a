"""Session hooks: verified memory at the moments a coding agent's client calls out.

Clients run a command at points of a session and read what it prints (the idea of
seed 004's hook-based automation). Three points help here:

- **session start**: the repository's verified memories, within a token budget that
  adapts to how many memories the repository has (``TIERS``);
- **prompt submitted**: the verified memories relevant to what was just asked (a search
  on the prompt's words and the files it names), within a small budget, and nothing at
  all when none is relevant;
- **stop**: when the agent changed files since it last stored a memory (or was last
  reminded), one reminder to store what it learned, or to fix a memory that misled it.
  Never twice in a row: a client that continues because of the reminder says so
  (``stop_hook_active``), and the reminder itself, in the transcript, resets the count.

Every memory is verified before it is shown, by ``MemoryService.context``, which follows
the ref rule: a verdict only at the main line's tip, a view anywhere else. What each
client expects on stdout differs (``output``); which client has which hook is
``SUPPORTED``. This module decides and shapes; ``cli/hook.py`` reads stdin and prints.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from verified_memory.errors import ValidationError
from verified_memory.limits import check_depth
from verified_memory.models import Memory, parse_citation
from verified_memory.prompt import relevance
from verified_memory.service import Context, MemoryService

__all__ = [
    "CLIENTS",
    "EVENTS",
    "REMINDER",
    "SUPPORTED",
    "TIERS",
    "HookInput",
    "Tier",
    "count_active",
    "edits_since_capture",
    "output",
    "prompt_context",
    "prompt_paths",
    "prompt_terms",
    "relevant_memories",
    "session_context",
    "stop_reminder",
    "tier_for",
]

Client = Literal["claude-code", "codex", "cursor", "vscode"]
Event = Literal["session-start", "prompt", "stop"]
CLIENTS: tuple[Client, ...] = ("claude-code", "codex", "cursor", "vscode")
EVENTS: tuple[Event, ...] = ("session-start", "prompt", "stop")
#: The hooks each client has that can carry what we say (Cursor's prompt hook can only
#: allow or block a prompt; VS Code's prompt hook has no context field).
SUPPORTED: Mapping[Client, frozenset[Event]] = {
    "claude-code": frozenset(EVENTS),
    "codex": frozenset(EVENTS),
    "cursor": frozenset({"session-start"}),
    "vscode": frozenset({"session-start"}),
}


# --------------------------------------------------------------------------- budgets


@dataclass(frozen=True, slots=True)
class Tier:
    """How much a repository's memories may take of a prompt, by how many it has."""

    name: str
    below: int | None  # active memories, exclusive; None: no upper bound
    session_budget: int  # tokens at session start
    prompt_budget: int  # tokens for one prompt's relevant memories
    session_limit: int  # memories verified at session start
    prompt_limit: int  # memories verified for one prompt


#: Seed 004's adaptive budgets (500 / 1,000 / 2,000 / 3,000 tokens at session start for
#: fewer than 10 / 50 / 200 memories / more); a prompt gets about the seed's "semantic"
#: share, at least the 300 tokens a context needs for its header and notes.
TIERS: tuple[Tier, ...] = (
    Tier("simple", 10, 500, 300, 10, 5),
    Tier("medium", 50, 1000, 350, 20, 5),
    Tier("complex", 200, 2000, 700, 40, 8),
    Tier("full", None, 3000, 1100, 50, 10),
)


def tier_for(active: int) -> Tier:
    return next(t for t in TIERS if t.below is None or active < t.below)


def count_active(service: MemoryService, repo: str) -> int:
    """Active memories of ``repo``, counted up to the last tier's threshold (one indexed
    read of at most 200 rows; no telemetry: nothing is handed on)."""
    cap = max(t.below for t in TIERS if t.below is not None)
    return len(service.memories.recent(repo, limit=cap))


# --------------------------------------------------------------------------- input


@dataclass(frozen=True, slots=True)
class HookInput:
    """What a client tells its hook on stdin, the fields we use, whatever the client."""

    cwd: Path | None = None  # the project (Claude Code, Codex: cwd; Cursor: workspace_roots)
    prompt: str | None = None
    transcript: Path | None = None
    continuing: bool = False  # the agent already continues because of a stop hook

    @classmethod
    def parse(cls, data: object) -> HookInput:
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ValidationError("the hook's input on stdin must be a JSON object")
        roots = data.get("workspace_roots")
        cwd = data.get("cwd") or (roots[0] if isinstance(roots, list) and roots else None)
        prompt, transcript = data.get("prompt"), data.get("transcript_path")
        loops = data.get("loop_count")
        return cls(
            cwd=_path(cwd),
            prompt=prompt if isinstance(prompt, str) else None,
            transcript=_path(transcript),
            continuing=data.get("stop_hook_active") is True
            or (isinstance(loops, int) and loops > 0),
        )


def _path(value: object) -> Path | None:
    """A path the input gives, or None for one no file system can take (not a string,
    empty, a NUL byte, a lone surrogate JSON can spell): read as absent, like a missing one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        encoded = os.fsencode(value)
    except UnicodeError:
        return None
    return None if b"\0" in encoded else Path(value)


# --------------------------------------------------------------------------- contexts


def session_context(service: MemoryService, repo: str, *, ref: str = "HEAD",
                    budget: int | None = None, limit: int | None = None,
                    hydration: str = "summary") -> Context:
    """The session-start context, within the repository's tier unless told."""
    if budget is None or limit is None:
        tier = tier_for(count_active(service, repo))
        budget = tier.session_budget if budget is None else budget
        limit = tier.session_limit if limit is None else limit
    return service.context(repo, ref=ref, hydration=hydration, limit=limit, budget=budget)


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.[A-Za-z0-9]{1,8})(?::\d+(?:-\d+)?)?")
#: Words a prompt is made of that say nothing about the code.
_STOP_WORDS = """
a about above after again all also am an and any are as at be because been before being
below between both but by can could did do does doing done down during each else few for
from further get got had has have having he her here hers him his how i if in into is it
its itself just let like make me more most my myself need no nor not now of off on once
only or other our ours out over own please same she should so some such than that the
their them then there these they this those through to too try under until up us use used
using very want was we were what when where which while who whom why will with would you
your yours add change check code file fix help implement look new run see show tell test
tests update work write
"""
_STOP = frozenset(_STOP_WORDS.split())
MAX_TERMS = 8


def prompt_terms(prompt: str) -> list[str]:
    """The words of a prompt worth searching for, most telling first (identifiers and
    long words), at most ``MAX_TERMS``."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(prompt):
        lowered = word.lower()
        if len(lowered) >= 3 and lowered not in _STOP:
            seen.setdefault(lowered, None)
    telling = sorted(seen, key=lambda w: (("_" in w) or any(c.isdigit() for c in w), len(w)),
                     reverse=True)
    return telling[:MAX_TERMS]


def prompt_paths(prompt: str) -> list[str]:
    """File paths a prompt names (``src/net.py``, ``net.py:12``), in order, at most 5."""
    found = dict.fromkeys(m.group(1).lstrip("./") for m in _PATH.finditer(prompt))
    return [p for p in found if p and not p.startswith("http")][:5]


def relevant_memories(service: MemoryService, repo: str, text: str,
                      limit: int) -> tuple[list[Memory], str]:
    """The active memories ``text`` (a prompt, a task) is about, best first, at most
    ``limit``, and the words they were searched by. A memory is about it when it cites a
    file the text names (those first) or one of its telling words is in the memory's
    subject, fact or tags. Not verified yet, and no telemetry: the caller verifies
    what it uses (``MemoryService.context``) and records what it hands on."""
    terms, paths = prompt_terms(text), prompt_paths(text)
    found: dict[str, Memory] = {}
    by_path: set[str] = set()
    for named in paths:
        try:
            path = parse_citation({"path": named, "line_start": 1}, "path").path
        except ValidationError:  # not a path inside a repository (e.g. "../x")
            continue
        for memory in service.memories.by_path(repo, path, limit=limit):
            found.setdefault(memory.id, memory)
            by_path.add(memory.id)
    for term in terms:
        for memory in service.memories.search(repo, term, limit=limit):
            found.setdefault(memory.id, memory)
    query = " ".join(terms)
    ranked = sorted(found.values(), key=lambda m: (m.id in by_path, relevance(m, query)),
                    reverse=True)
    return ranked[:limit], query


def prompt_context(service: MemoryService, repo: str, prompt: str, *, ref: str = "HEAD",
                   budget: int | None = None, limit: int | None = None,
                   hydration: str = "full") -> Context | None:
    """The verified memories relevant to ``prompt`` (``relevant_memories``), within the
    repository's tier unless told; None when no memory matches (nothing is verified
    then)."""
    if not prompt_terms(prompt) and not prompt_paths(prompt):
        return None
    tier = tier_for(count_active(service, repo))
    ranked, query = relevant_memories(service, repo, prompt,
                                      limit if limit is not None else tier.prompt_limit)
    if not ranked:
        return None
    service.record_retrieval(ranked, "prompt")
    return service.context(repo, ref=ref, memories=ranked, query=query or None,
                           hydration=hydration,
                           budget=budget if budget is not None else tier.prompt_budget)


# --------------------------------------------------------------------------- stop

#: The reminder; its first words mark it, so a transcript shows where it was given.
REMINDER = (
    "verified-memory reminder: before you finish, consider what this session taught you "
    "about this codebase that a future session would otherwise have to rediscover: a "
    "convention, an invariant, files that must change together. Store each such durable "
    "fact with memory_store, citing the smallest code ranges that show it. If a memory "
    "you used turned out wrong, fix it (memory_supersede, or memory_invalidate); if one "
    "helped, say so (memory_log_applied, then memory_feedback). Do not store temporary "
    "workarounds, TODOs or one-off fixes. If there is nothing durable to store, just "
    "finish.")
_MARK = REMINDER.split(":", 1)[0]
#: Tools that change files, by the names the clients give them.
EDIT_TOOLS = frozenset({
    "edit", "multiedit", "write", "notebookedit",  # Claude Code
    "apply_patch",  # Codex
    "edit_file", "write_file", "create_file", "str_replace_based_edit_tool",
    "insert_edit_into_file", "replace_string_in_file",
})
#: Our tools that capture or correct what was learned.
CAPTURE_TOOLS = ("memory_store", "memory_supersede", "memory_recite", "memory_invalidate")
#: How much of a transcript's end is read (a long session's start is old news).
TRANSCRIPT_TAIL = 8 * 1024 * 1024


def _tool_calls(entry: object) -> Iterator[str]:
    """The names of the tool calls in a transcript entry, whatever its nesting: Claude
    Code's ``tool_use`` blocks, Codex's ``function_call`` and ``custom_tool_call``."""
    if isinstance(entry, Mapping):
        if entry.get("type") in ("tool_use", "function_call", "custom_tool_call") and \
                isinstance(entry.get("name"), str):
            yield entry["name"]
        for value in entry.values():
            if isinstance(value, Mapping | list):
                yield from _tool_calls(value)
    elif isinstance(entry, list):
        for value in entry:
            yield from _tool_calls(value)


def edits_since_capture(lines: Sequence[str]) -> int:
    """File edits in a transcript (JSON lines) after the last memory was stored or
    corrected, or the last reminder; lines that are not JSON are skipped."""
    edits = 0
    for line in lines:
        if _MARK in line:
            edits = 0
            continue
        try:
            entry: Any = json.loads(line)
            check_depth(entry, "a transcript line")  # _tool_calls walks it recursively
        except (ValueError, RecursionError):  # ValidationError is a ValueError too
            continue
        for name in _tool_calls(entry):
            short = name.rsplit("__", 1)[-1]  # mcp__verified-memory__memory_store
            if short.endswith(CAPTURE_TOOLS):
                edits = 0
            elif short.lower() in EDIT_TOOLS:
                edits += 1
    return edits


def _tail(path: Path) -> list[str]:
    with path.open("rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - TRANSCRIPT_TAIL))
        data = fh.read()
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[1:] if size > TRANSCRIPT_TAIL else lines  # the first one may be cut


def stop_reminder(event: HookInput) -> str | None:
    """The reminder when the agent changed files since it last stored a memory (or was
    reminded), else None. No transcript, or one that cannot be read: None (we cannot
    tell, so we stay quiet). Only a regular file is read: a FIFO would not open without
    a writer, and a device such as /dev/zero would never end."""
    if event.continuing or event.transcript is None:
        return None
    try:
        if not event.transcript.is_file():
            return None
        lines = _tail(event.transcript)
    except OSError:
        return None
    return REMINDER if edits_since_capture(lines) else None


# --------------------------------------------------------------------------- output

_EVENT_NAMES: Mapping[Event, str] = {"session-start": "SessionStart",
                                     "prompt": "UserPromptSubmit", "stop": "Stop"}


def output(client: Client, event: Event, text: str) -> dict[str, Any]:
    """What ``client``'s hook for ``event`` expects on stdout to show ``text`` to the
    agent (context for session start and prompts, the reminder for stop)."""
    if event not in SUPPORTED[client]:
        raise ValidationError(f"{client} has no {event} hook that can carry context")
    if event == "stop":  # Claude Code and Codex: the agent goes on with the reason
        return {"decision": "block", "reason": text}
    if client == "cursor":
        return {"additional_context": text}
    return {"hookSpecificOutput": {"hookEventName": _EVENT_NAMES[event],
                                   "additionalContext": text}}
