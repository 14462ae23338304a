"""``vmem review``: the conventions a change touches, verified at its head.

Two ways in: a local repository (``--base`` and ``--head``, diffed from their merge base
as GitHub diffs a pull request), or a GitHub pull request (``--pr N``). The review never
changes a memory unless ``--apply`` is given, and ``--apply`` on a pull request is refused
until it has merged.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TYPE_CHECKING

import click

from verified_memory.cli.env import tell_not_checked
from verified_memory.errors import ValidationError, VerifiedMemoryError

if TYPE_CHECKING:
    from verified_memory.cli.env import Env
    from verified_memory.review import ReviewReport
    from verified_memory.review.github import Posted

__all__ = ["FAIL_ON", "FINDINGS_EXIT", "review"]

#: ``--fail-on`` choices and the finding kinds (``FindingKind`` values) each turns into a
#: failed check.
FAIL_ON: dict[str, tuple[str, ...]] = {
    "breaks": ("breaks", "deletes"),
    "unverifiable": ("unverifiable",),
}
#: Exit code of a review whose findings ``--fail-on`` names (1 is an error, 2 usage).
FINDINGS_EXIT = 3


@click.command("review")
@click.option("--base", metavar="REF",
              help="Local: the branch the change goes into [default: origin/HEAD, else main, "
                   "else master]. The change is diffed from the merge base, as on GitHub.")
@click.option("--head", metavar="REF", help="Local: the change's last commit [default: HEAD].")
@click.option("--pr", "number", type=click.IntRange(min=1), metavar="N",
              help="Review GitHub pull request N of --repo instead (GITHUB_TOKEN for private "
                   "repositories and for --post).")
@click.option("--repo", metavar="OWNER/NAME",
              help="Repository (default: the origin remote of the working copy).")
@click.option("--post", is_flag=True,
              help="With --pr: post the findings as one pull request review, updated in place "
                   "on the next run; nothing is posted when there are none.")
@click.option("--apply", is_flag=True,
              help="After the merge: refresh, relocate or invalidate the memories for real "
                   "(without it only telemetry is written). Refused for an unmerged --pr.")
@click.option("--fail-on", "fail_on", multiple=True, type=click.Choice(list(FAIL_ON)),
              help="Exit 3 (a red check) when the change breaks or deletes cited code "
                   "(breaks), or when a touched memory could not be verified "
                   "(unverifiable); repeatable. The report is printed (and posted) first. "
                   "[default: exit 0 whatever the findings]")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@click.pass_context
def review(ctx: click.Context, base: str | None, head: str | None, number: int | None,
           repo: str | None, post: bool, apply: bool, fail_on: tuple[str, ...],
           as_json: bool) -> None:
    """Remind a change's author of the conventions it touches: find the memories whose
    citations overlap the changed lines, verify them at the head, and report each as
    holding (a reminder), broken, deleted or unverifiable, with links to the cited code.

    \b
    vmem review --base main --head HEAD
    vmem review --repo acme/app --pr 412 --post      # in CI, GITHUB_TOKEN set
    vmem review --base OLD_SHA --head main --apply   # after the merge
    vmem review --pr 412 --post --fail-on breaks     # a red check when a convention breaks
    """
    from verified_memory.cli.render import Output

    env: Env = ctx.find_root().obj
    env.out = Output(as_json)
    posted: Posted | None = None
    failure: VerifiedMemoryError | None = None
    if number is None:
        if post:
            raise click.UsageError("--post needs --pr N: only a GitHub pull request takes a "
                                   "review")
        report = _review_local(env, base, head, repo, apply)
    else:
        if base or head:
            raise click.UsageError("--pr takes its base and head from the pull request: "
                                   "drop --base and --head")
        report, posted, failure = _review_pull(env, number, repo, post, apply)
    _print(env, report, posted)
    tell_not_checked(env, [f.verification for f in report.findings])
    if failure is not None:
        raise failure
    _fail_on(report, fail_on)


def _fail_on(report: ReviewReport, fail_on: tuple[str, ...]) -> None:
    kinds = [kind for choice in dict.fromkeys(fail_on) for kind in FAIL_ON[choice]]
    found = [f.kind.value for f in report.findings if f.kind.value in kinds]
    if not found:
        return
    counts = ", ".join(f"{found.count(kind)} {kind}" for kind in kinds if kind in found)
    click.echo(f"vmem: failing the check (--fail-on {' '.join(dict.fromkeys(fail_on))}): "
               f"{counts}", err=True)
    sys.exit(FINDINGS_EXIT)


def _review_local(env: Env, base: str | None, head: str | None, repo: str | None,
                  apply: bool) -> ReviewReport:
    from verified_memory.cli.env import progress, running
    from verified_memory.review import Links, review
    from verified_memory.review.git import default_base, local_diff, remote_web_url
    from verified_memory.sources.local_git import LocalGitSource

    wc = env.working_copy
    if wc is None:
        raise ValidationError(f"{env.directory} is not inside a git working copy: run vmem "
                              "review in one (or pass -C DIR), or review a GitHub pull request "
                              "with --pr N --repo OWNER/NAME")
    name = env.repo(repo)
    diff = local_diff(wc, base or default_base(wc), head or "HEAD")
    with running(env, source=LocalGitSource(wc)) as service, progress(env) as shown:
        return review(service, name, diff, apply=apply,
                      links=Links(name, remote_web_url(wc)), on_progress=shown)


def _review_pull(env: Env, number: int, repo: str | None, post: bool,
                 apply: bool) -> tuple[ReviewReport, Posted | None, VerifiedMemoryError | None]:
    from verified_memory.cli.env import progress, running
    from verified_memory.cli.passes import bounded
    from verified_memory.config import Settings
    from verified_memory.review import Links, review, web_url
    from verified_memory.review.git import clone_holding
    from verified_memory.review.github import PullRequests, check_apply
    from verified_memory.sources.github import GitHubSource

    settings = Settings.from_env()
    name = env.repo(repo)
    if post and not settings.github_token:
        raise ValidationError("--post needs GITHUB_TOKEN: a token that may write pull request "
                              "reviews (in GitHub Actions: permissions: pull-requests: write)")
    with GitHubSource.from_settings(name, settings) as github:
        pulls = PullRequests(github)
        # Reading the pull request and verifying is one pass under the verify time limit;
        # posting comes after it, so that a slow pass still gets its review posted.
        with bounded(env.out, env.seconds("verify")) as budget:
            pull = pulls.get(number)
            verify_at = check_apply(pull) if apply else pull.head_sha
            wc = env.working_copy
            local = (clone_holding(wc, name, {pull.head_sha, pull.base_sha, verify_at})
                     if wc else None)
            diff = pulls.diff(pull, local)
            with running(env, source=local or github) as service, progress(env) as shown:
                report = review(service, name, diff, verify_at=verify_at, apply=apply,
                                links=Links(name, web_url(github.base_url)),
                                pull_request=number, on_progress=shown)
        env.budget = budget
        posted, failure = None, None
        if post:
            try:
                posted = pulls.post(pull, report)
            except VerifiedMemoryError as exc:
                failure = exc
        return replace(report, requests=pulls.requests), posted, failure


def _print(env: Env, report: ReviewReport, posted: Posted | None) -> None:
    from verified_memory.review import render_markdown

    if env.out.as_json:
        env.out.json({**report.to_dict(), "posted": posted.to_dict() if posted else None})
    else:
        sys.stdout.write(render_markdown(report))
    if posted is None:
        return
    if posted.action == "none":
        env.out.err.print("vmem: nothing posted: no findings", markup=False)
    else:
        where = f": {posted.url}" if posted.url else ""
        env.out.err.print(f"vmem: {posted.action} review {posted.review_id}{where} "
                          f"({posted.created} comments created, {posted.updated} updated, "
                          f"{posted.deleted} deleted)", markup=False)
