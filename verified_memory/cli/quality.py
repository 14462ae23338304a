"""``vmem pending``, ``approve``, ``reject`` and ``promote``: the people's side of memory
quality (``quality.py``). Memories of a category that needs approval (business rules by
default) wait as ``pending`` until someone other than their proposer approves them;
memories applied often with success are validated and queue for promotion into a rules
file, which a person does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import click

from verified_memory.cli.env import Env, common, running, say
from verified_memory.cli.render import Output
from verified_memory.models import Memory
from verified_memory.rules_file import DEFAULT_SECTION

__all__ = ["COMMANDS"]

pass_env = click.make_pass_decorator(Env)


@click.command()
@common
@click.option("--category", help="Only memories of this category.")
@click.option("--tag", help="Only memories with this tag.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True,
              help="How many memories.")
@pass_env
def pending(env: Env, repo: str | None, as_json: bool, category: str | None, tag: str | None,
            limit: int) -> None:
    """Memories waiting for approval (categories that need a person, e.g. business
    rules): never injected until approved."""
    env.out = Output(as_json)
    name = env.repo(repo)
    with running(env) as service:
        found = service.pending(name, limit=limit, category=category, tag=tag)
    env.out.memories(found, title=f"pending in {name}")


@click.command()
@click.argument("memory_id")
@click.option("--by", help="Who approves (default: VMEM_ACTOR), the event's actor in "
                           "`vmem log`. Not whoever proposed it.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def approve(env: Env, memory_id: str, by: str | None, as_json: bool) -> None:
    """Approve a pending memory: it becomes active (verified before use, like any)."""
    env.out = Output(as_json)
    with running(env) as service:
        memory = service.approve(memory_id, by=by)
    env.out.done(memory, f"approved {memory.id}: active")


@click.command()
@click.argument("memory_id")
@click.option("--reason", required=True, help="Why it is rejected (kept with the memory).")
@click.option("--by", help="Who rejects (default: VMEM_ACTOR), the event's actor in "
                           "`vmem log`.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def reject(env: Env, memory_id: str, reason: str, by: str | None, as_json: bool) -> None:
    """Reject a pending memory: it becomes invalid, with the reason."""
    env.out = Output(as_json)
    with running(env) as service:
        memory = service.reject(memory_id, reason, by=by)
    env.out.done(memory, f"rejected {memory.id}")


@click.command()
@click.argument("memory_id", required=False)
@click.option("--list", "show_queue", is_flag=True,
              help="List the promotion queue: validated memories (applied 3+ times, 90%+ "
                   "success, no conflict) not promoted yet.")
@click.option("--to", "rules_file", type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="The rules file to write the rule into (AGENTS.md, "
                                   "CLAUDE.md, .cursor/rules/NAME.mdc, ...).")
@click.option("--section", default=DEFAULT_SECTION, show_default=True,
              help="The section (a ## heading) the rule goes under.")
@click.option("--remove", is_flag=True,
              help="Take the memory's rule back out of the file it was promoted into, "
                   "whatever its status; it is no longer promoted.")
@click.option("--by", help="Who takes the rule out (with --remove; default: VMEM_ACTOR), "
                           "the event's actor in `vmem log`.")
@common
@pass_env
def promote(env: Env, memory_id: str | None, show_queue: bool, rules_file: Path | None,
            section: str, remove: bool, by: str | None, repo: str | None,
            as_json: bool) -> None:
    """Promote a validated memory into a rules file, as a rule citing its verified
    lines (a person's decision: nothing is promoted on its own), or take its rule
    back out.

    \b
    vmem promote --list
    vmem promote 3f2c... --to AGENTS.md
    vmem promote 3f2c... --remove
    """
    from verified_memory.rules_file import promote_rule

    env.out = Output(as_json)
    if by is not None and not remove:
        raise click.UsageError("--by goes with --remove (who takes the rule out)")
    if remove:
        # --section given at all, its default spelled out too, has no meaning here
        named_section = click.get_current_context().get_parameter_source("section") \
            is not click.core.ParameterSource.DEFAULT
        _demote(env, memory_id, by, given=[name for name, given in (
            ("--list", show_queue), ("--to", rules_file is not None),
            ("--section", named_section)) if given])
        return
    if show_queue or memory_id is None:
        if memory_id is not None or rules_file is not None:
            raise click.UsageError("--list takes no MEMORY_ID or --to")
        name = env.repo(repo)
        with running(env) as service:
            queue = service.promotion_queue(name)
        env.out.memories(queue, title=f"ready to promote in {name}")
        return
    if rules_file is None:
        raise click.UsageError("name the rules file with --to FILE")
    target = Path(os.path.abspath(env.directory / rules_file))  # links kept: not resolve()
    named = _rules_name(env, target)
    with running(env) as service:
        check = service.promote(memory_id, named, write=lambda c: promote_rule(
            target, c, section=section))
    if not as_json:
        say(f"vmem: {memory_id} was verified at {check.where}")
    env.out.done(check.memory, f"promoted {check.memory.id} into {named}")


def _rules_name(env: Env, target: Path) -> str:
    """A rules file as a promotion records it: by its place in the working copy
    (``net/AGENTS.md``), so that ``--remove``, ``vmem show`` and the dashboard name the
    same file from any directory; a file outside it by its absolute path."""
    root = env.working_copy.resolve() if env.working_copy is not None else None
    place = target.parent.resolve() / target.name  # the folders' links, not the file's
    if root is not None and place.is_relative_to(root):
        return place.relative_to(root).as_posix()
    return str(target)


def _rules_file(env: Env, named: str) -> Path:
    """Where a recorded rules file is: a relative name from the working copy's root (as
    ``_rules_name`` records it), or from where vmem runs when there is none."""
    path = Path(named)
    return path if path.is_absolute() else (env.working_copy or env.directory) / path


def _demote(env: Env, memory_id: str | None, by: str | None, given: list[str]) -> None:
    """``vmem promote ID --remove``: the rule out of the file the memory names (a
    relative name from the working copy's root: ``_rules_file``), and the memory
    demoted."""
    from verified_memory.rules_file import remove_rule

    if memory_id is None or given:
        raise click.UsageError("--remove takes a MEMORY_ID, and no " + (
            ", ".join(given) or "--list") + ": the rule is taken out of the file the "
            "memory was promoted into")
    taken: dict[str, Path | None] = {}  # the rules file -> where its rule was not found

    def take_out(memory: Memory) -> Callable[[], None] | None:
        named = memory.promoted_to or ""
        target = _rules_file(env, named)
        undo = remove_rule(target, memory.id)
        taken[named] = None if undo is not None else target
        return undo

    with running(env) as service:
        memory = service.demote(memory_id, by=by, remove=take_out)
    ((rules_file, missed),) = taken.items()
    if missed is not None:
        # A file not there at all may be a run from another directory: name where.
        held = (f"{rules_file} held no rule of memory {memory.id} (taken out by hand?)"
                if missed.exists() else f"there is no {missed}: no rule of memory "
                f"{memory.id} to take out")
        say(f"vmem: {held}; it is no longer recorded as promoted")
    env.out.done(memory, f"took the rule of {memory.id} out of {rules_file}"
                 if missed is None else f"demoted {memory.id}")


COMMANDS = (pending, approve, reject, promote)
