"""``vmem git``: memories as markdown files in the repository (``.memory/``), exported
from and imported into any store, and the repository as a store of its own."""

from __future__ import annotations

from pathlib import Path

import click

from verified_memory.cli.env import Env, removed_if_failed, running, say
from verified_memory.cli.render import Output
from verified_memory.errors import ValidationError
from verified_memory.gitstore.layout import DEFAULT_FOLDER

__all__ = ["git"]

pass_env = click.make_pass_decorator(Env)


def _folder(env: Env, given: Path | None) -> Path:
    """``--dir``, else ``.memory`` at the top of the working copy (or here)."""
    if given is not None:
        return given if given.is_absolute() else env.directory / given
    return (env.working_copy or env.directory) / DEFAULT_FOLDER


def _dir_option(f: click.decorators.FC) -> click.decorators.FC:
    return click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path),
                        help=f"The memory folder [default: {DEFAULT_FOLDER} at the top of "
                             "the working copy].")(f)


@click.group()
def git() -> None:
    """Memories as files in the repository: reviewable in pull requests, travelling with
    clones, merged by git.

    \b
    vmem git export --commit      # .memory/ from the store, one [memory] commit
    vmem git import               # .memory/ into the store (edits supersede, deletions invalidate)
    """


@git.command("export")
@_dir_option
@click.option("--repo", "repos", multiple=True, metavar="OWNER/NAME",
              help="Repositories to export (repeatable) [default: the origin remote's].")
@click.option("--commit", is_flag=True,
              help="Commit what changed in the folder, as one '[memory] ...' commit.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def export(env: Env, folder: Path | None, repos: tuple[str, ...], commit: bool,
           as_json: bool) -> None:
    """Write the store's memories into the folder: one markdown file per memory (YAML
    front matter, then the fact and its reason), telemetry as JSON Lines per actor and
    session, tombstones, and index.md by category. Deterministic: a re-run changes
    nothing."""
    from verified_memory.gitstore.sync import export_folder

    env.out = Output(as_json)
    target = _folder(env, folder)
    chosen = list(repos) or [env.repo(None)]
    if commit:  # a commit that cannot be made is refused before the folder is written
        from verified_memory.gitstore.commit import working_copy_root

        working_copy_root(target)
    with running(env) as service:
        counts = export_folder(service.memories, target, chosen)
    committed = _commit(env, target, f"export {counts.memories} memories of "
                                     f"{', '.join(chosen)}") if commit else None
    if as_json:
        env.out.json({**counts.to_dict(), "commit": committed})
        return
    if counts.not_imported:
        say(f"vmem: {len(counts.not_imported)} file(s) hold memories the store does not "
            f"have (kept; vmem git import reads them): {', '.join(counts.not_imported[:5])}")
    env.out.out.print(
        f"exported {counts.memories} memories, {counts.events} events and "
        f"{counts.tombstones} tombstones to {target}: {len(counts.written)} files written, "
        f"{len(counts.removed)} removed" + (f"; committed {committed[:12]}" if committed
                                            else ""), markup=False)


@git.command("import")
@_dir_option
@click.option("--ref", default="HEAD", show_default=True,
              help="Where edited citations are fingerprinted and new memories verified.")
@click.option("--no-verify", is_flag=True,
              help="Do not verify the new memories (they stay unconfirmed until a verify "
                   "at the main line's tip).")
@click.option("--apply", is_flag=True,
              help="Apply hand edits and deletions even off the main line's tip (after a "
                   "merge, as `vmem review --apply`).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def import_(env: Env, folder: Path | None, ref: str, no_verify: bool, apply: bool,
            as_json: bool) -> None:
    """Read the folder into the store, all checked before anything is written: new
    memories are added and the active ones verified at REF (a verdict only at the main
    line's tip), a memory whose fact, subject or citations were edited by hand is
    superseded, one whose file was deleted is invalidated; off the main line's tip (a
    branch, a pull request) those edits and deletions are held back and listed, unless
    --apply. A re-run adds nothing."""
    from verified_memory.gitstore.sync import import_folder, plan_import

    env.out = Output(as_json)
    source = _folder(env, folder)
    if not source.is_dir():
        raise ValidationError(f"{source} is not a folder (vmem git export writes one)")
    ref = env.ref(ref)
    # A folder refused (a bad file, an unknown ref) leaves no new, empty store behind.
    with removed_if_failed(env.db), running(env, create=True) as service:
        plan = plan_import(service, source, ref=ref)
        result = import_folder(service, source, ref=ref, verify=not no_verify, plan=plan,
                               apply=apply or None)
    if as_json:
        env.out.json(result.to_dict())
        return
    verified = ", ".join(f"{n} {d}" for d, n in sorted(result.verified.items()))
    env.out.out.print(
        f"imported {len(result.new)} new memories, {len(result.superseded)} superseded by "
        f"hand edits, {len(result.invalidated)} invalidated (file deleted), "
        + (f"{len(result.erased)} forgotten (forgotten elsewhere: a tombstone in the "
           "folder), " if result.erased else "")
        + f"{result.unchanged} unchanged; {result.events} events, {result.tombstones} "
        "tombstones" + (f"; verified ({result.scope}): {verified}" if verified else ""),
        markup=False)
    if result.unreviewed:
        say(f"vmem: {len(result.unreviewed)} pending memor"
            f"{'y' if len(result.unreviewed) == 1 else 'ies'} whose file was deleted: a "
            "deleted file does not review one, so it stays pending (`vmem reject ID --reason "
            "...`): " + ", ".join(i[:8] for i in result.unreviewed))
    if result.held_back:
        say(f"vmem: {len(result.held_back)} hand edit(s), deletion(s) or forgetting(s) held "
            f"back ({'; '.join(result.held_why)}; import at the main line's tip after the "
            "merge, or --apply at a commit it holds): "
            + ", ".join(i[:8] for i in result.held_back))


def _commit(env: Env, folder: Path, subject: str) -> str | None:
    from verified_memory.gitstore.commit import commit_folder

    return commit_folder(folder, f"[memory] {subject}")


@git.command()
@_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def reindex(env: Env, folder: Path | None, as_json: bool) -> None:
    """Rebuild the SQLite index of the repository store (VMEM_DATABASE_URL=git:.memory)
    from the folder's files. The index is git-ignored; it is also rebuilt by itself
    whenever the files changed behind it (a pull, a merge, a hand edit)."""
    from verified_memory.gitstore.store import GitStore

    env.out = Output(as_json)
    target = _folder(env, folder)
    with GitStore(target, create=False) as store:
        memories, events, tombstones = store.reindex()
    if as_json:
        env.out.json({"memories": memories, "events": events, "tombstones": tombstones})
        return
    env.out.out.print(f"rebuilt the index of {target}: {memories} memories, {events} "
                      f"events, {tombstones} tombstones", markup=False)
