"""The README stays true: its examples run, every command is documented, __all__ is pinned."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

import verified_memory
from tests.gitrepo import GitRepo
from verified_memory.cli import cli

README = (Path(__file__).parent.parent / "README.md").read_text()
NET = """\
MAX_RETRIES = 3
TIMEOUT = 10


def fetch(url):
    for _ in range(MAX_RETRIES):
        if get(url, timeout=TIMEOUT):
            return True
    return False
"""


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def commands(group: click.Group, prefix: str = "") -> list[str]:
    out = []
    for name, command in group.commands.items():
        out.append(f"{prefix}{name}")
        if isinstance(command, click.Group):
            out += commands(command, f"{prefix}{name} ")
    return out


@pytest.fixture
def app_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    repo = GitRepo.project(tmp_path / "app", {"app/net.py": NET},
                           origin="https://github.com/acme/app.git")
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'docs.db'}")
    return repo


@pytest.mark.parametrize("name", commands(cli))
def test_every_command_is_documented_and_has_help(name: str) -> None:
    assert f"`vmem {name}" in README, f"vmem {name} is missing from the README"
    proc = subprocess.run([sys.executable, "-m", "verified_memory", *name.split(), "--help"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0
    assert "Usage: vmem" in proc.stdout
    assert len(proc.stdout.splitlines()) > 3


def test_readme_console_session_runs(app_repo: GitRepo) -> None:
    (session,) = blocks("console")
    lines = [line[2:] for line in session.splitlines() if line.startswith("$ ")]
    assert len(lines) >= 6
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for line in lines:
        proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env,
                              check=False)
        assert proc.returncode == 0, f"{line}\n{proc.stderr}"
    proc = subprocess.run(["bash", "-c", "vmem recent --json"], capture_output=True,
                          text=True, env=env, check=True)
    assert proc.stdout.count('"subject"') == 2


def test_readme_ref_rule_example_is_what_vmem_says(app_repo: GitRepo) -> None:
    section = README.split("## The ref rule", 1)[1].split("\n## ", 1)[0]
    (example,) = re.findall(r"```text\n(.*?)```", section, flags=re.S)
    command, said = example.strip().splitlines()
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    subprocess.run(["bash", "-c", "vmem store --subject s --fact f --cite app/net.py:1-2"],
                   env=env, check=True, capture_output=True)
    app_repo.run("checkout", "-q", "-b", "feature/redirects")
    app_repo.write("app/net.py", NET.replace("= 3", "= 4"))
    app_repo.commit("redirects")
    app_repo.run("checkout", "-q", "main")
    proc = subprocess.run(["bash", "-c", command.removeprefix("$ ")], capture_output=True,
                          text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    pattern = re.escape(said).replace("1a2b3c4d5e6f", "[0-9a-f]{12}").replace(
        "9f8e7d6c5b4a", "[0-9a-f]{12}")
    said_by_vmem = [line for line in proc.stderr.splitlines() if line.startswith("vmem:")]
    assert re.fullmatch(pattern, said_by_vmem[0]), proc.stderr
    assert "nothing stored changed (a view)" in proc.stdout
    status = subprocess.run(["bash", "-c", "vmem recent --json"], capture_output=True,
                            text=True, env=env, check=True)
    assert status.stdout.count('"status": "active"') == 1


def test_readme_python_example_runs(app_repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    example, provider = blocks("python")
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "Retry budget" in out
    assert "'applied': 1" in out
    exec(compile(provider, "README.md", "exec"), {})  # VerifiedMemoryProvider
    out = capsys.readouterr().out
    assert "Requests time out after TIMEOUT seconds." in out
    assert "most relevant to `" in out


def test_quickstart_has_exactly_two_commands_and_ci_runs_the_second() -> None:
    quickstart = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    bash = re.findall(r"```bash\n(.*?)```", quickstart, flags=re.S)
    assert len(bash) == 2
    assert "vmem demo" in bash[0]
    assert "pytest" in bash[1]
    ci = (Path(__file__).parent.parent / ".ci" / "run").read_text()
    assert bash[1].strip() in ci


def test_public_api_is_pinned() -> None:
    assert verified_memory.__all__ == sorted(verified_memory.__all__)
    for name in verified_memory.__all__:
        assert hasattr(verified_memory, name), name
    assert {"MemoryService", "Memory", "Citation", "NewMemory", "Outcome", "Status",
            "VerifiedMemoryError", "open_store"} <= set(verified_memory.__all__)


def test_public_names_load_on_first_use_and_the_version_is_the_installed_one() -> None:
    code = ("import sys, verified_memory as v; assert 'verified_memory.service' not in "
            "sys.modules; v.MemoryService; assert 'verified_memory.service' in sys.modules; "
            "print(v.__version__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == importlib.metadata.version("verified-memory")
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        verified_memory.nothing  # noqa: B018


def test_the_architecture_document_names_every_module() -> None:
    """docs/ARCHITECTURE.md stays the map: a module it does not name fails this."""
    doc = (Path(__file__).parent.parent / "docs" / "ARCHITECTURE.md").read_text()
    package = Path(verified_memory.__file__).parent
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if path.name in ("__init__.py", "__main__.py") and relative.count("/") == 0:
            continue
        name = relative.removesuffix("/__init__.py").removesuffix(".py")
        stem = name.rsplit("/", 1)[-1]
        assert f"`{name}" in doc or f"`{stem}.py`" in doc or f"`{name}/`" in doc, relative
    for path in package.rglob("*.py"):
        assert "DESIGN.md" not in path.read_text(), f"{path.name} points to a missing doc"


def section(title: str) -> str:
    return README.split(f"\n### {title}\n", 1)[1].split("\n### ", 1)[0]


def shell(line: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env,
                          check=False)


def test_readme_init_example_runs_and_check_says_what_the_readme_says(
        app_repo: GitRepo) -> None:
    setup = section("Set up in one command")
    (commands,) = re.findall(r"```bash\n(.*?)```", setup, flags=re.S)
    lines = [line.split("#", 1)[0].strip() for line in commands.strip().splitlines()]
    assert lines[0] == "vmem init claude-code --dry-run"
    for line in lines:
        done = shell(line)
        assert done.returncode == 0, f"{line}\n{done.stderr}"
    assert (app_repo.path / ".codex" / "config.toml").is_file()
    (said,) = re.findall(r"```text\n(.*?)```", setup, flags=re.S)
    for path in (".codex", "AGENTS.md"):  # back to "after vmem init claude-code"
        target = app_repo.path / path
        if target.is_dir():
            for child in sorted(target.iterdir()):
                child.unlink()
            target.rmdir()
        else:
            target.unlink()
    done = shell("vmem init --check")
    assert done.returncode == 0, done.stderr
    assert done.stdout == said


def test_readme_prompt_hook_example_runs(app_repo: GitRepo) -> None:
    hooks = section("Session hooks")
    command = re.findall(r"```bash\n(.*?)```", hooks, flags=re.S)[0].strip()
    assert command.endswith("| vmem hook prompt --client claude-code")
    stored = shell("vmem store --subject 'Retry budget' --fact 'HTTP calls retry "
                   "MAX_RETRIES times, then give up.' --cite app/net.py:1-8 --json")
    assert stored.returncode == 0, stored.stderr
    done = shell(command)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "UserPromptSubmit"
    assert json.loads(stored.stdout)["id"] in answer["additionalContext"]
    shape = json.loads(re.findall(r"```json\n(.*?)```", hooks, flags=re.S)[0])
    assert set(shape["hookSpecificOutput"]) == set(answer)
