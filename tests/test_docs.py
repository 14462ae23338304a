"""The README stays true: its examples run, every command is documented, __all__ is pinned."""

from __future__ import annotations

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
    repo = GitRepo(tmp_path / "app")
    repo.write("app/net.py", NET)
    repo.commit("initial")
    repo.run("remote", "add", "origin", "https://github.com/acme/app.git")
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
    (example,) = blocks("python")
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "Retry budget" in out
    assert "'applied': 1" in out


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
