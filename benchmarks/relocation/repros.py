"""Minimal reproductions of the verifier's misclassifications found by the benchmark.

    .venv/bin/python -m benchmarks.relocation.repros

Each case is a two-commit repository (before, after), one citation made at "before",
the right answer, and what ``check_citations`` says. The code is shortened from the real
files where the benchmark found the failure (named in ``seen_in``).
"""

from __future__ import annotations

import subprocess
import tempfile
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verified_memory.sources.local_git import LocalGitSource
from verified_memory.verify.bulk import check_citations


@dataclass(frozen=True)
class Repro:
    name: str
    seen_in: str
    before: dict[str, str]
    after: dict[str, str]
    cite: tuple[str, int, int]
    right: tuple[str, str | None, int | None, int | None]  # status, path, start, end


def _d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


PY_LOADERS = _d('''
    class Loader:
        def __init__(self, stream):
            Reader.__init__(self, stream)
            Scanner.__init__(self)


    class UnsafeLoader:
        def __init__(self, stream):
            Reader.__init__(self, stream)
            Scanner.__init__(self)
    ''')

PY_KEYS = _d('''
    def append_keys(keys, arg, index):
        for long in arg.longs:
            key = Long(long)
            keys.append(Key(key, index))
        for long in arg.aliases:
            key = Long(long)
            keys.append(Key(key, index))


    def other():
        return 1
    ''')

PY_PARSERS = _d('''
    def parse_charset(text):
        match = SIMPLE.match(text)
        if not match:
            return None
        return match.group(1)


    def parse_encoding(text):
        match = SIMPLE.match(text)
        if not match:
            return None
        return match.group(1)
    ''')

JAVA_ASSERT = _d('''
    class Assert {
        static void check(boolean cond) {
            if (!cond) throw new AssertionError();
        }

        static void check(boolean cond, String msg) {
            if (!cond) throw new AssertionError(msg);
        }
    }
    ''')

PY_EOF = _d('''
    def eof(s):
        if s.err:
            return ERROR
        if s.end_top:
            return END
        s.step(" ")
        if s.end_top:
            return END
        return ERROR
    ''')

NEW_FUNCTION = _d('''
    def begin(s):
        s.err = None
        s.end_top = False
        s.parse_state = []
        return s


    ''')

GO_KDSA = _d('''
    package ecdsa

    func canUseKDSA(c Curve) (functionCode uint64, blockSize int, ok bool) {
    \treturn 0, 0, false
    }
    ''')

GO_KDSA_WRAPPED = _d('''
    package ecdsa

    func canUseKDSA(c Curve) (
    \tfunctionCode uint64,
    \tblockSize int,
    \tok bool,
    ) {
    \treturn 0, 0, false
    }
    ''')

RUST_POLL = _d('''
    impl AsyncRead for &[u8] {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }
    ''')

RUST_POLL_JOINED = _d('''
    impl AsyncRead for &[u8] {
        fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }
    ''')  # noqa: E501

GO_HASH = _d('''
    package bytealg

    func HashStr(s string) uint32 {
    \thash := uint32(0)
    \tfor i := 0; i < len(s); i++ {
    \t\thash = hash*PrimeRK + uint32(s[i])
    \t}
    \treturn hash
    }

    func HashStrBytes(s []byte) uint32 {
    \thash := uint32(0)
    \tfor i := 0; i < len(s); i++ {
    \t\thash = hash*PrimeRK + uint32(s[i])
    \t}
    \treturn hash
    }
    ''')


GO_BWT = _d('''
    package bzip2

    func other() int {
    \treturn 1
    }

    func scatter(tt []uint32, start uint, c []uint) uint32 {
    \tsum := uint(0)
    \tfor i := 0; i < 256; i++ {
    \t\tsum += c[i]
    \t\tc[i] = sum - c[i]
    \t}

    \tfor i := range tt {
    \t\tb := tt[i] & 0xff
    \t\ttt[c[b]] |= uint32(i) << 8
    \t\tc[b]++
    \t}

    \treturn tt[start] >> 8
    }
    ''')

GO_CF = _d('''
    package macos

    func CFDataGetBytePtr(data CFRef) uintptr {
    \tret := syscall(abi.FuncPCABI0(x509_CFDataGetBytePtr_trampoline), uintptr(data), 0, 0, 0, 0, 0)
    \treturn ret
    }
    ''')

GO_CF_WRAPPED = _d('''
    package macos

    func CFDataGetBytePtr(data CFRef) uintptr {
    \tret := syscall(
    \t\tabi.FuncPCABI0(x509_CFDataGetBytePtr_trampoline),
    \t\tuintptr(data),
    \t\t0,
    \t\t0,
    \t\t0,
    \t\t0,
    \t\t0,
    \t)
    \treturn ret
    }
    ''')

GO_GUARD = _d('''
    package rwlock

    func (g *{T}) Map(f func(*T) *U) *U {
    \tdata := f(g.data)
    \tg.release = false
    \treturn data
    }

    func (g *{T}) Unlock() {
    \tg.lock.Unlock()
    }
    ''')


def _guard(name: str, *, with_map: bool = True, unlock: bool = True) -> str:
    text = GO_GUARD.replace("{T}", name)
    head, map_fn, unlock_fn = text.split("\n\n")
    parts = [head] + ([map_fn] if with_map else []) + ([unlock_fn.rstrip("\n")] if unlock else [])
    return "\n\n".join(parts) + "\n"


def _swap_go_hash() -> str:
    head, first, second = GO_HASH.split("\n\n")
    return "\n\n".join([head, second.rstrip("\n"), first]) + "\n"


REPROS: list[Repro] = [
    Repro(
        "A. edited code whose old text also exists in another definition -> relocated there",
        "yaml/loader.py (UnsafeLoader.__init__), cryptography algorithms.py (key_size), "
        "asyncio/unix_events.py, tokio stdio_common.rs",
        {"loader.py": PY_LOADERS},
        {"loader.py": PY_LOADERS.replace("Scanner.__init__(self)\n",
                                         "Scanner.__init__(self, strict=False)\n", 2)
         .replace("Scanner.__init__(self, strict=False)\n", "Scanner.__init__(self)\n", 1)},
        ("loader.py", 8, 10),
        ("changed", "loader.py", 8, 10),
    ),
    Repro(
        "A2. moved and edited: the cited lines' twin elsewhere in the same function is taken",
        "clap src/mkeymap.rs (append_keys: the same two lines for long names and aliases)",
        {"keys.py": PY_KEYS},
        {"keys.py": "def other():\n    return 1\n",
         "keys_helpers.py": PY_KEYS.split("\n\n\n")[0].replace(
             "    for long in arg.aliases:\n        key = Long(long)",
             "    for long in arg.aliases:\n        key = Long(long.lower())") + "\n"},
        ("keys.py", 6, 7),
        ("changed", None, None, None),
    ),
    Repro(
        "B. deleted code that also exists (already existed) in another definition -> relocated",
        "ElementPath.py, just-diff index.cjs/.mjs, supports-color (vendored copy in chalk), "
        "tokio rwlock.rs, zod locales",
        {"negotiate.py": PY_PARSERS},
        {"negotiate.py": PY_PARSERS.split("\n\n\n")[0] + "\n"},
        ("negotiate.py", 9, 11),
        ("missing", None, None, None),
    ),
    Repro(
        "B2. deleted code whose copy already lived in another file (renamed since) -> "
        "relocated to the copy",
        "zod locales (one file per language), tokio net/tcp vs net/unix split_owned.rs, "
        "javax.sound Control.Type vs MidiDevice hashCode, supports-color vendored in chalk",
        {"tcp/split.py": PY_PARSERS.split("\n\n\n")[1],
         "unix/split.py": PY_PARSERS.split("\n\n\n")[1] + "\n\nMODE = 1\n"},
        {"tcp/split.py": "VALUE = 1\n",
         "unix/legacy/split.py": PY_PARSERS.split("\n\n\n")[1] + "\n\nMODE = 2\n"},
        ("tcp/split.py", 2, 4),
        ("missing", None, None, None),
    ),
    Repro(
        "C1. moved method with an overload left behind -> changed (the overload)",
        "javac util/Assert.java (check), DOM3TreeWalker.java, ToolEnvironment.java",
        {"Assert.java": JAVA_ASSERT},
        {"Assert.java": JAVA_ASSERT.replace(
            "\n    static void check(boolean cond, String msg) {\n"
            "        if (!cond) throw new AssertionError(msg);\n    }\n", ""),
         "AssertHelpers.java": _d('''
            final class AssertHelpers {
                static void check(boolean cond, String msg) {
                    if (!cond) throw new AssertionError(msg);
                }
            }
            ''')},
        ("Assert.java", 6, 8),
        ("relocated", "AssertHelpers.java", 2, 4),
    ),
    Repro(
        "C2. moved function; another changed file has a different function of the same name "
        "-> changed there",
        "tokio mpsc list.rs -> error.rs (channel, also in bounded.rs), go syscall "
        "(Getdirentries), negotiator (specify)",
        {"pkg/a.py": "def helper(x):\n    return x * 2\n\n\ndef other():\n    return 1\n",
         "pkg/b.py": "def helper(y):\n    return str(y)\n",
         "pkg/c.py": "VALUE = 1\n"},
        {"pkg/a.py": "def other():\n    return 1\n",
         "pkg/b.py": "def helper(y):\n    return repr(y)\n",
         "pkg/c.py": "VALUE = 1\n\n\ndef helper(x):\n    return x * 2\n"},
        ("pkg/a.py", 1, 2),
        ("relocated", "pkg/c.py", 4, 5),
    ),
    Repro(
        "D. repeated snippet in a function that moved: nearest to the old line number wins",
        "go encoding/json scanner.go (eof), tomllib/_parser.py, clap parser.rs, "
        "socksclient.js, GIFWritableStreamMetadata.java",
        {"scan.py": PY_EOF},
        {"scan.py": NEW_FUNCTION + NEW_FUNCTION.replace("begin", "reset") + PY_EOF},
        ("scan.py", 7, 8),
        ("relocated", "scan.py", 21, 22),
    ),
    Repro(
        "E1. formatter wraps a signature and adds the trailing comma -> changed",
        "gofmt'd Go (required comma), prettier JS/TS, black Python, rustfmt Rust",
        {"kdsa.go": GO_KDSA},
        {"kdsa.go": GO_KDSA_WRAPPED},
        ("kdsa.go", 3, 5),
        ("relocated", "kdsa.go", 3, 9),
    ),
    Repro(
        "E2. formatter joins a signature and drops the trailing comma -> changed",
        "tokio io/async_read.rs (rustfmt with a wider max_width)",
        {"read.rs": RUST_POLL},
        {"read.rs": RUST_POLL_JOINED},
        ("read.rs", 2, 8),
        ("relocated", "read.rs", 2, 4),
    ),
    Repro(
        "E3. a window's statement exploded over many more lines -> changed",
        "go crypto/x509/internal/macos/corefoundation.go (7-argument syscall calls)",
        {"cf.go": GO_CF},
        {"cf.go": GO_CF_WRAPPED},
        ("cf.go", 4, 5),
        ("relocated", "cf.go", 4, 13),
    ),
    Repro(
        "G. a function moved to a new file, where a line of it no longer parses: an intact "
        "window -> missing",
        "go compress/bzip2/bzip2.go (inverseBWT; the benchmark's edit made `range` `range2`)",
        {"bzip2.go": GO_BWT},
        {"bzip2.go": GO_BWT.split("\n\n")[0] + "\n\n" + GO_BWT.split("\n\n")[1] + "\n",
         "bzip2_internal.go": "package bzip2\n\n" + "\n\n".join(GO_BWT.split("\n\n")[2:])
         .replace("range tt {", "range2 tt {")},
        ("bzip2.go", 9, 12),
        ("relocated", "bzip2_internal.go", 5, 8),
    ),
    Repro(
        "H. twin methods of two types moved to two new files: the other type's copy is taken",
        "tokio sync/rwlock write_guard.rs and write_guard_mapped.rs (map)",
        {"guard.go": _guard("WriteGuard"), "mapped.go": _guard("MappedWriteGuard")},
        {"guard.go": _guard("WriteGuard", with_map=False),
         "mapped.go": _guard("MappedWriteGuard", with_map=False),
         "guard_helpers.go": _guard("WriteGuard", unlock=False),
         "_mapped_helpers.go": _guard("MappedWriteGuard", unlock=False)},
        ("guard.go", 4, 6),
        ("relocated", "guard_helpers.go", 4, 6),
    ),
    Repro(
        "F. a twin function takes the cited lines' old place -> valid at the old place",
        "go internal/bytealg/bytealg.go (HashStr*)",
        {"hash.go": GO_HASH},
        {"hash.go": _swap_go_hash()},
        ("hash.go", 12, 15),
        ("relocated", "hash.go", 4, 7),
    ),
]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=r", "-c",
                           "user.email=r@localhost", "-c", "commit.gpgsign=false", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for path in list(repo.rglob("*")):
        if path.is_file() and ".git" not in path.parts:
            path.unlink()
    for name, text in files.items():
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD")


def run(repro: Repro, root: Path) -> tuple[str, str]:
    repo = root / repro.name[:2].strip(". ")
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    before = _commit(repo, repro.before, "before")
    _commit(repo, repro.after, "after")
    path, start, end = repro.cite
    with LocalGitSource(repo) as source:
        [checked] = check_citations(source, [("c", {"path": path, "line_start": start,
                                                    "line_end": end, "sha": before})])
    result = checked.to_dict()
    said = (f"{result.get('status')} {result.get('path')}:{result.get('line_start')}-"
            f"{result.get('line_end')}" if "status" in result else f"error {result['error']}")
    status, rpath, rstart, rend = repro.right
    right = f"{status} {rpath}:{rstart}-{rend}" if rpath else status
    return said, right


def main(argv: Sequence[str] | None = None) -> int:
    with tempfile.TemporaryDirectory(prefix="vmem-repro-") as tmp:
        failing = 0
        for repro in REPROS:
            said, right = run(repro, Path(tmp))
            breaks = ("changed", "missing")
            ok = said == right if right.split()[0] not in breaks else said.split()[0] in breaks
            failing += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {repro.name}\n     cited {repro.cite}; "
                  f"ours: {said}; right: {right}\n     seen in: {repro.seen_in}")
        print(f"\n{len(REPROS) - failing} ok, {failing} failing")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
