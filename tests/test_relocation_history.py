"""Relocation on the shapes real histories take (issue 13).

Each test builds a repository the way a real project's history looks (a ``src/``
layout adopted while the files were edited, modules made private, a package renamed, a
module split into a package, blank lines at a citation's edges, one-line constants and
fields, code examples in documentation), cites code at the first commit as a memory
would, and checks at HEAD; the bulk check (anchors derived) must answer the same
(``History.check``). Nothing here reads a fetched mirror: the real-history benchmark
(``benchmarks/real_history``) is where these shapes were found.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.test_relocation import (
    History,
    changed,
    check_one,
    missing,
    moved,
    span,
    src,
    within,
)
from verified_memory.anchors.fingerprint import fingerprint_lines
from verified_memory.anchors.normalize import split_lines
from verified_memory.models import Anchor, Citation, Location
from verified_memory.verify.alignment import rewrapped
from verified_memory.verify.candidates import MAX_CANDIDATES, ChangedFiles
from verified_memory.verify.files import FileText


@pytest.fixture(name="history")
def _history(tmp_path: Path) -> History:
    return History(GitRepo(tmp_path / "repo"))


# ------------------------------------------------------------------ re-wrapped windows


def _file(text: str) -> FileText:
    file = FileText.from_bytes("0" * 40, text.encode())
    assert file is not None
    return file


def _citation(lines: list[str], start: int, end: int, offset: int) -> Citation:
    anchor = Anchor("class_definition", "Big", "0" * 16, offset, "python")
    return Citation("big.py", start, end, None, None,
                    fingerprint_lines(lines, start, end, anchor=anchor))


def test_a_rewrapped_window_in_a_long_definition_is_found_by_its_text() -> None:
    """A call cited in a 4,000-line class, exploded one argument per line by a
    formatter (with the trailing comma it adds): found by searching the cited text in
    the class's text, and, when the old text cannot be read, by hashing growing windows;
    both find the same lines, the copy nearest the cited offset of two."""
    methods = [f"    def m{i}(self):\n        return self.value + {i}\n" for i in range(2000)]
    call = "        return configure(alpha, beta, gamma, delta)\n"
    exploded = ("        return configure(\n            alpha,\n            beta,\n"
                "            gamma,\n            delta,\n        )\n")
    old_text = "class Big:\n" + "".join(methods[:1500]) + "    def target(self):\n" + call \
        + "".join(methods[1500:])
    new_text = "class Big:\n" + "".join(methods[:10]) + "    def early(self):\n" + exploded \
        + "".join(methods[10:1600]) + "    def target(self):\n" + exploded \
        + "".join(methods[1600:])
    old_lines = split_lines(old_text)
    cited_line = old_lines.index(call.rstrip("\n")) + 1
    citation = _citation(old_lines, cited_line, cited_line, cited_line - 1)
    new = _file(new_text)
    new_lines = split_lines(new_text)
    copies = [i + 1 for i, line in enumerate(new_lines) if line == "        return configure("]
    assert len(copies) == 2
    expected = (copies[1], copies[1] + 5)  # the second copy: 3,200 lines nearer the offset
    old = _file(old_text)
    text = old.hasher().text(cited_line - 1, cited_line - 1)
    assert rewrapped(citation, new, 1, len(new_lines), text) == expected
    assert rewrapped(citation, new, 1, len(new_lines)) == expected
    assert rewrapped(citation, new, 1, copies[1] - 1, text) == (copies[0], copies[0] + 5)


def test_a_rewrapped_window_must_end_where_the_cited_text_ends() -> None:
    """The cited text may occur inside a longer line (``f(a, b)`` in ``g(f(a, b))``) or
    run into the next line: only a window of whole lines with exactly that text counts."""
    old_lines = ["def f():", "    return total(a, b)", ""]
    citation = _citation(old_lines, 2, 2, 1)
    text = _file("\n".join(old_lines)).hasher().text(1, 1)
    inside = _file("def f():\n    return total(a, b) + 1\n    x = 2\n")
    assert rewrapped(citation, inside, 1, 3, text) is None
    assert rewrapped(citation, inside, 1, 3) is None
    split = _file("def f():\n    y = 1\n    return total(\n        a, b)\n")
    assert rewrapped(citation, split, 1, 4, text) == (3, 4)
    assert rewrapped(citation, split, 1, 4) == (3, 4)


# ------------------------------------------------------------------ unpaired file moves


def _unpaired(history: History, old: str, new: str) -> None:
    """The premise of a test: git did not see ``old`` -> ``new`` as a rename (the file
    was edited too much on the way), so only the verifier can tell."""
    status = history.repo.run("diff", "--name-status", "-M", history.first, "HEAD")
    assert f"D\t{old}" in status.splitlines(), status
    assert f"A\t{new}" in status.splitlines(), status


def _module(functions: int, prefix: str) -> str:
    """A module of ``functions`` small functions, each unlike the others."""
    return "".join(src(f'''
        def {prefix}_{i}(value):
            """Step {i} of the {prefix} pipeline."""
            scaled = value * {i + 2}
            return scaled - {i}


    ''') for i in range(functions))


REGISTER = '''\
    def register(self, name, handler):
        if name in self.handlers:
            raise KeyError(f"{name} is already registered")
        self.handlers[name] = handler
        return handler
'''
CORE = src('''
    import re

    _SLUG = re.compile(r"[^a-z0-9]+")


    def slugify(title, limit=40):
        """A URL slug for a title."""
        words = _SLUG.sub("-", title.lower()).strip("-")
        if len(words) > limit:
            words = words[:limit].rsplit("-", 1)[0]
        return words or "untitled"


    class Registry:
        """Named handlers."""

        def __init__(self):
            self.handlers = {}

''') + REGISTER + "\n\n"
REGISTER_NOW = '''\
    def register(self, name, handler, *, replace=False):
        if name in self.handlers and not replace:
            raise ValueError(f"{name!r} is taken")
        self.handlers[name] = handler
        return handler
'''
SLUG_WINDOW = '''\
    if len(words) > limit:
        words = words[:limit].rsplit("-", 1)[0]
'''


def test_src_layout_adopted_while_the_files_were_edited(history: History) -> None:
    """``pkg/core.py`` becomes ``src/pkg/core.py`` in the same stretch of history as a
    rewrite of most of it, so git pairs nothing. The window and the definition that
    survived are followed into the new file, exactly; the method that was rewritten
    there (three of its five lines) is ``changed`` there, not ``missing``: the new file
    continues the old one, so its definition of that name is the cited one."""
    old = CORE + _module(6, "legacy")
    history.start({"pkg/core.py": old, "pkg/__init__.py": "from .core import slugify\n"})
    window = history.cite("pkg/core.py", *span(old, SLUG_WINDOW))
    slugify = history.cite("pkg/core.py", *span(old, CORE[CORE.index("def slugify"):
                                                         CORE.index("class Registry")]
                                                   .rstrip("\n") + "\n"))
    register = history.cite("pkg/core.py", *within(old, CORE, REGISTER))
    new = "from __future__ import annotations\n\n" + CORE.replace(
        REGISTER, REGISTER_NOW) + _module(9, "modern")
    history.repo.remove("pkg")
    history.repo.write("src/pkg/core.py", new)
    history.repo.write("src/pkg/__init__.py", "from .core import Registry, slugify\n")
    history.repo.commit("src layout; the legacy pipeline replaced")
    _unpaired(history, "pkg/core.py", "src/pkg/core.py")
    moved(check_one(history, window), "src/pkg/core.py", span(new, SLUG_WINDOW))
    body = CORE[CORE.index("def slugify"):CORE.index("class Registry")].rstrip("\n") + "\n"
    moved(check_one(history, slugify), "src/pkg/core.py", span(new, body))
    changed(check_one(history, register), "src/pkg/core.py", span(new, REGISTER_NOW))


MODELS = src('''
    import typing


    class QueryParams:
        """Query string parameters."""

        def __init__(self, items):
            self._items = list(items)

        def get(self, key, default=None):
            for name, value in self._items:
                if name == key:
                    return value
            return default

        def keys(self):
            return [name for name, _ in self._items]


    class Response:
        """An HTTP response."""

        def __init__(self, status_code, content=b""):
            self.status_code = status_code
            self.content = content

        def raise_for_status(self):
            if 400 <= self.status_code < 600:
                message = f"{self.status_code} error for {self!r}"
                raise RuntimeError(message)
            return self
''')
RAISE_WINDOW = '''\
            message = f"{self.status_code} error for {self!r}"
            raise RuntimeError(message)
'''
GET_WINDOW = '''\
        for name, value in self._items:
            if name == key:
                return value
'''


def test_modules_made_private_and_split(history: History) -> None:
    """``models.py`` becomes ``_models.py`` (much edited) and its ``QueryParams`` moves to
    a new ``_urls.py``, rewritten: code that survived is followed into either file, the
    class itself is ``changed`` in ``_urls.py`` (its name is new there), not ``missing``."""
    history.start({"client/models.py": MODELS, "client/__init__.py": "from .models import *\n"})
    raising = history.cite("client/models.py", *span(MODELS, RAISE_WINDOW))
    getter = history.cite("client/models.py", *span(MODELS, GET_WINDOW))
    params_class = MODELS[MODELS.index("class QueryParams"):MODELS.index("class Response")]
    params = history.cite("client/models.py", *span(MODELS, params_class.rstrip("\n") + "\n"))
    response = MODELS[MODELS.index("class Response"):]
    models = src('''
        from __future__ import annotations

        import json
        import typing

        from ._urls import QueryParams


        class Headers(dict):
            """Case-insensitive headers."""

            def __getitem__(self, key):
                return super().__getitem__(key.lower())

            def __setitem__(self, key, value):
                super().__setitem__(key.lower(), value)

            def __contains__(self, key):
                return super().__contains__(key.lower())


    ''') + response + src('''

            def json(self):
                return json.loads(self.content)
    ''')
    urls = src('''
        class QueryParams:
            """Immutable query string parameters."""

            def __init__(self, items=()):
                self._items = tuple(items)

            def get(self, key, default=None):
                for name, value in self._items:
                    if name == key:
                        return value
                return default
    ''')
    history.repo.remove("client/models.py")
    history.repo.write("client/_models.py", models)
    history.repo.write("client/_urls.py", urls)
    history.repo.write("client/__init__.py", "from ._models import *\n")
    history.repo.commit("private modules; QueryParams in its own module")
    _unpaired(history, "client/models.py", "client/_models.py")
    moved(check_one(history, raising), "client/_models.py", span(models, RAISE_WINDOW))
    moved(check_one(history, getter), "client/_urls.py", span(urls, GET_WINDOW))
    changed(check_one(history, params), "client/_urls.py", span(urls, urls))


TYPES_TS = src('''
    export type Primitive = string | number | boolean;

    export class ZodString {
      readonly kind = "string";

      parse(input: unknown): string {
        if (typeof input !== "string") {
          throw new TypeError(`expected a string, got ${typeof input}`);
        }
        return input;
      }
    }

    export function string(): ZodString {
      return new ZodString();
    }
''')
PARSE_TS = '''\
    if (typeof input !== "string") {
      throw new TypeError(`expected a string, got ${typeof input}`);
    }
'''


def test_package_moved_while_a_twin_copy_was_deleted(history: History) -> None:
    """A project kept two copies of its sources (``src/`` and a generated ``deno/lib/``)
    and moved them into ``packages/zod/src/v3/``. Git pairs the new file with one copy;
    code cited in the other copy was not "there all along" in another file: the new
    file continues the cited one too (same file name, its lines), so the code moved."""
    history.start({"src/types.ts": TYPES_TS, "deno/lib/types.ts": TYPES_TS,
                   "src/index.ts": 'export * from "./types";\n'})
    new = "// v3, kept for compatibility\n" + TYPES_TS
    history.repo.remove("src")
    history.repo.remove("deno")
    history.repo.write("packages/zod/src/v3/types.ts", new)
    history.repo.write("packages/zod/src/v3/index.ts", 'export * from "./types";\n')
    history.repo.commit("monorepo")
    status = history.repo.run("diff", "--name-status", "-M", history.first, "HEAD")
    paired = [line.split("\t")[1] for line in status.splitlines() if line.startswith("R")
              and line.endswith("packages/zod/src/v3/types.ts")]
    assert len(paired) == 1, status
    unpaired = "deno/lib/types.ts" if paired[0] == "src/types.ts" else "src/types.ts"
    cited = history.cite(unpaired, *span(TYPES_TS, PARSE_TS))
    moved(check_one(history, cited), "packages/zod/src/v3/types.ts", span(new, PARSE_TS))


UTIL = src('''
    import html
    import urllib.parse


    def quote_path(path):
        """Percent-encode a URL path."""
        return urllib.parse.quote(path, safe="/")


    def join_url(base, path):
        if not base.endswith("/"):
            base += "/"
        return base + quote_path(path.lstrip("/"))


    def escape_text(text):
        """Escape text for HTML."""
        escaped = html.escape(text, quote=False)
        return escaped.replace("\\n", "<br>")


    def escape_attribute(value):
        escaped = html.escape(value, quote=True)
        return f'"{escaped}"'
''')
JOIN_WINDOW = '''\
    if not base.endswith("/"):
        base += "/"
'''


def test_module_becomes_a_package(history: History) -> None:
    """``util.py`` becomes the package ``util/`` (``url.py`` and ``html.py``, each with
    half of it, so git pairs neither): each part continues the module; code is followed
    into the part that has it, and an edited function is ``changed`` there."""
    history.start({"app/util.py": UTIL, "app/main.py": "from .util import join_url\n"})
    join = history.cite("app/util.py", *span(UTIL, JOIN_WINDOW))
    escape = UTIL[UTIL.index("def escape_text"):UTIL.index("def escape_attribute")]
    escape = escape.rstrip("\n") + "\n"
    escaping = history.cite("app/util.py", *span(UTIL, escape))
    url = "import urllib.parse\n\n\n" + UTIL[UTIL.index("def quote_path"):
                                             UTIL.index("def escape_text")].rstrip("\n") + "\n"
    escape_now = escape.replace('escaped.replace("\\n", "<br>")',
                                'escaped.replace("\\n", "<br>\\n")')
    html_part = "import html\n\n\n" + escape_now + "\n\n" + UTIL[
        UTIL.index("def escape_attribute"):]
    history.repo.remove("app/util.py")
    history.repo.write("app/util/url.py", url)
    history.repo.write("app/util/html.py", html_part)
    history.repo.write("app/util/__init__.py", "from .html import *\nfrom .url import *\n")
    history.repo.commit("util becomes a package")
    _unpaired(history, "app/util.py", "app/util/url.py")
    moved(check_one(history, join), "app/util/url.py", span(url, JOIN_WINDOW))
    changed(check_one(history, escaping), "app/util/html.py", span(html_part, escape_now))


NET = src('''
    import time

    MAX_RETRIES = 3
    BACKOFF = 1.5


    def fetch(url):
        for _ in range(MAX_RETRIES):
            time.sleep(BACKOFF)
            return get(url)
        return None
''')
SETTINGS_YML = "server:\n  host: 0.0.0.0\n  port: 8080\n  workers: 4\n  timeout: 30\n"


def test_a_citation_without_an_anchor_edited_in_a_renamed_file_is_changed_there(
        history: History) -> None:
    """A window over two definitions (the constants and the function after them) has
    no anchor, nor has a file no grammar covers. Git pairs each file's rename, and one
    cited line was edited on the way: ``changed`` in the new file, as the same edit in
    place is. It was ``missing``: only the cited file itself was searched for what is
    left of an edited citation."""
    history.start({"app/net.py": NET, "config/app.yml": SETTINGS_YML})
    window = "MAX_RETRIES = 3\nBACKOFF = 1.5\n\n\ndef fetch(url):\n"
    code = history.cite("app/net.py", *span(NET, window))
    assert code.fingerprint.anchor is None
    config = history.cite("config/app.yml", 2, 4)
    net_now = NET.replace("MAX_RETRIES = 3", "MAX_RETRIES = 4")
    yml_now = SETTINGS_YML.replace("port: 8080", "port: 9090")
    history.repo.remove("app/net.py")
    history.repo.write("app/http.py", net_now)
    history.repo.remove("config/app.yml")
    history.repo.write("config/settings.yml", yml_now)
    history.repo.commit("net becomes http, app.yml settings.yml; new defaults")
    edited, settings = history.check(code, config)
    changed(edited, "app/http.py", span(net_now, window.replace("= 3", "= 4")))
    changed(settings, "config/settings.yml", (2, 4))
    # Gone from the new file too: still missing.
    history.repo.write("app/http.py", "def fetch(url):\n    return get(url)\n")
    history.repo.commit("simpler")
    missing(check_one(history, code))


SERVER_GO = src('''
    package server

    import "net/http"

    func Health(w http.ResponseWriter, r *http.Request) {
    \tw.Header().Set("Content-Type", "text/plain")
    \tw.WriteHeader(http.StatusOK)
    \tw.Write([]byte("ok"))
    }

    func Routes(mux *http.ServeMux) {
    \tmux.HandleFunc("/health", Health)
    }
''')


def test_deleted_code_is_not_relocated_into_a_markdown_guide(history: History) -> None:
    """A Go handler is deleted from its file while a new guide shows it in a code
    example: documentation is not where code moves to; the handler is ``missing``."""
    history.start({"server/server.go": SERVER_GO, "README.md": "# server\n"})
    health = SERVER_GO[SERVER_GO.index("func Health"):SERVER_GO.index("func Routes")]
    health = health.rstrip("\n") + "\n"
    whole = history.cite("server/server.go", *span(SERVER_GO, health))
    window = history.cite("server/server.go", *within(SERVER_GO, health,
                                                      '\tw.WriteHeader(http.StatusOK)\n'
                                                      '\tw.Write([]byte("ok"))\n'))
    history.repo.write("server/server.go", SERVER_GO.replace(health + "\n", "").replace(
        'mux.HandleFunc("/health", Health)', 'mux.Handle("/health", http.NotFoundHandler())'))
    history.repo.write("docs/guide.md", "# Writing handlers\n\nA handler looks like this:\n\n"
                       "```go\n" + health + "```\n")
    history.repo.commit("health checks move to the load balancer")
    missing(check_one(history, whole))
    missing(check_one(history, window))


def test_code_is_not_relocated_into_a_compiled_bundle(history: History) -> None:
    """actions/setup-python's shape: a TypeScript action compiles ``src/`` into
    ``dist/index.js`` at every release. A constant leaves ``src/install-python.ts`` for
    ``src/utils.ts``, edited, while the bundle holds its old line word for word: the
    bundle is built output, not where code moves, so the answer is the source file
    (``changed``), not a line of the bundle."""
    install = ("import * as core from '@actions/core';\n\n"
               "const TOKEN = core.getInput('token');\n\n"
               "export async function installPython(version: string): Promise<void> {\n"
               "  core.info(`Installing ${version}`);\n}\n")
    history.start({"src/install-python.ts": install,
                   "src/utils.ts": "export const IS_WINDOWS = process.platform === 'win32';\n",
                   "dist/index.js": "'use strict';\n"})
    cited = history.cite("src/install-python.ts",
                         *span(install, "const TOKEN = core.getInput('token');\n"))
    history.repo.write("src/install-python.ts", install.replace(
        "const TOKEN = core.getInput('token');\n\n", ""))
    utils = ("import * as core from '@actions/core';\n\n"
             "export const IS_WINDOWS = process.platform === 'win32';\n"
             "export const TOKEN = core.getInput('token', {required: true});\n")
    history.repo.write("src/utils.ts", utils)
    history.repo.write("dist/index.js", "'use strict';\n"
                       + "".join(f"var m{i} = require('./m{i}');\n" for i in range(50))
                       + "const TOKEN = core.getInput('token');\n")
    history.repo.commit("move the token to utils; release")
    changed(check_one(history, cited), "src/utils.ts",
            span(utils, "export const TOKEN = core.getInput('token', {required: true});\n"))


# ------------------------------------------------------------------ one-line citations


CONFIG_GO = src('''
    package config

    const DefaultPort = 8080

    const MaxBodyBytes = 1 << 20

    type Server struct {
    \tHost    string
    \tPort    int
    \tTimeout int
    }

    func (s *Server) Address() string {
    \treturn s.Host
    }
''')


def test_one_line_constants_and_fields(history: History) -> None:
    """A constant whose value changed is ``changed`` at its line (its declaration is
    still there by name), not ``missing``; a struct field is followed by its name when
    fields are added around it; a deleted constant is ``missing``."""
    history.start({"config/config.go": CONFIG_GO})
    port = history.cite("config/config.go", *span(CONFIG_GO, "const DefaultPort = 8080\n"))
    body = history.cite("config/config.go", *span(CONFIG_GO, "const MaxBodyBytes = 1 << 20\n"))
    timeout = history.cite("config/config.go", *span(CONFIG_GO, "\tTimeout int\n"))
    new = CONFIG_GO.replace("8080", "8081").replace("const MaxBodyBytes = 1 << 20\n\n", "") \
        .replace("\tHost    string\n", "\tScheme  string\n\tHost    string\n\tTLS     bool\n")
    history.repo.write("config/config.go", new)
    history.repo.commit("new default port; no body limit; TLS")
    changed_port = check_one(history, port)
    assert (changed_port.outcome.value, changed_port.location) == (
        "changed", Location("config/config.go", *span(new, "const DefaultPort = 8081\n")))
    missing(check_one(history, body))
    moved(check_one(history, timeout), "config/config.go", span(new, "\tTimeout int\n"))


SETTINGS_JAVA = src('''
    package com.example;

    public final class Settings {
        private static final long serialVersionUID = 1L;
        public static final int MAX_RETRIES = 3;
        private final String name;

        public Settings(String name) {
            this.name = name;
        }

        public String name() {
            return name;
        }
    }
''')


def test_one_line_fields_move_with_their_class_to_another_package(history: History) -> None:
    """A Java class moves to another package, rewritten around its fields (git pairs
    nothing): each field is found by its class and name, even ``serialVersionUID``,
    which every serializable class declares the same way."""
    other = SETTINGS_JAVA.replace("Settings", "Profile")
    history.start({"src/com/example/Settings.java": SETTINGS_JAVA,
                   "src/com/example/Profile.java": other})
    retries = history.cite("src/com/example/Settings.java",
                           *span(SETTINGS_JAVA, "    public static final int MAX_RETRIES = 3;\n"))
    serial = history.cite("src/com/example/Settings.java",
                          *span(SETTINGS_JAVA,
                                "    private static final long serialVersionUID = 1L;\n"))
    new = src('''
        package com.example.config;

        import java.util.Objects;

        /** Settings, validated. */
        public final class Settings {
            public static final int MAX_RETRIES = 3;

            private static final long serialVersionUID = 1L;
            private final String name;
            private final int level;

            public Settings(String name, int level) {
                this.name = Objects.requireNonNull(name);
                this.level = level;
            }

            public int level() {
                return level;
            }
        }
    ''')
    history.repo.remove("src/com/example/Settings.java")
    history.repo.write("src/com/example/config/Settings.java", new)
    history.repo.write("src/com/example/Profile.java", other.replace("3;", "5;"))
    history.repo.commit("config package")
    _unpaired(history, "src/com/example/Settings.java", "src/com/example/config/Settings.java")
    path = "src/com/example/config/Settings.java"
    moved(check_one(history, retries), path,
          span(new, "    public static final int MAX_RETRIES = 3;\n"))
    moved(check_one(history, serial), path,
          span(new, "    private static final long serialVersionUID = 1L;\n"))


# ------------------------------------------------------------------ blank edge lines


FORMAT_PY = src('''
    import os


    def home():
        return os.path.expanduser("~")
    def config_dir():
        base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home(), ".config")
        return os.path.join(base, "app")

    def cache_dir():
        return os.path.join(home(), ".cache", "app")
''')


def test_a_trailing_blank_line_cited_along_does_not_lose_the_anchor(history: History) -> None:
    """An agent cites ``config_dir`` with the blank line after it. Black then puts two
    blank lines between functions, and a new function goes above: the citation is the
    function's (not the module's), and follows it, its blank line with it."""
    history.start({"app/paths.py": FORMAT_PY})
    cited_text = FORMAT_PY[FORMAT_PY.index("def config_dir"):FORMAT_PY.index("def cache_dir")]
    first, last = span(FORMAT_PY, cited_text)  # the function...
    citation = history.cite("app/paths.py", first, last + 1)  # ... and the blank line after
    assert citation.fingerprint.anchor is not None
    assert citation.fingerprint.anchor.name == "config_dir"
    function = cited_text.rstrip("\n") + "\n"
    new = FORMAT_PY.replace("    return os.path.expanduser(\"~\")\ndef config_dir",
                            "    return os.path.expanduser(\"~\")\n\n\ndef config_dir") \
        .replace("\n\ndef cache_dir", "\n\n\ndef data_dir():\n    return home()\n\n\n"
                 "def cache_dir")
    history.repo.write("app/paths.py", new)
    history.repo.commit("black; data_dir")
    start, end = span(new, function)
    moved(check_one(history, citation), "app/paths.py", (start, end + 1))


def test_changed_files_nearest_first_of_the_cited_kind_and_by_module_name() -> None:
    """The search order: successors, then the cited folder, its parent's, and so on;
    never a file of another kind. Files naming the module: the same path under other
    folders or made private (surely), the same name elsewhere or a package of its name."""
    changed = ChangedFiles(["docs/guide.md", "pkg/a.py", "pkg/sub/b.py", "other/c.py",
                            "pkg/d.go", "src/pkg/core.py", "pkg/_core.py", "lib/core.py",
                            "pkg/core/url.py", "lib/helpers/buildURL.js"])
    assert changed.ordered("pkg/core.py", ["src/pkg/core.py"]) == [
        "src/pkg/core.py", "pkg/_core.py", "pkg/a.py", "pkg/core/url.py", "pkg/sub/b.py",
        "lib/core.py", "other/c.py"]
    assert changed.naming("pkg/core.py") == {"src/pkg/core.py": 2, "pkg/_core.py": 2,
                                             "lib/core.py": 1, "pkg/core/url.py": 1}
    assert changed.naming("lib/buildUrl.js") == {"lib/helpers/buildURL.js": 1}


def test_the_search_stops_at_the_nearest_changed_files() -> None:
    """A long gap changes thousands of files: a citation searches at most
    ``MAX_CANDIDATES`` of them, its successors and then the nearest paths first."""
    far = [f"z{n:03}/m.py" for n in range(MAX_CANDIDATES)]
    changed = ChangedFiles([*far, "pkg/a.py", "pkg/sub/b.py", "src/pkg/core.py"])
    ordered = changed.ordered("pkg/core.py", ["src/pkg/core.py"])
    assert len(ordered) == MAX_CANDIDATES
    assert ordered[:3] == ["src/pkg/core.py", "pkg/a.py", "pkg/sub/b.py"]
    assert ordered[3:] == far[:MAX_CANDIDATES - 3]


def test_built_output_is_told_by_its_folders_and_its_bundle_names() -> None:
    """A folder a build writes (``dist``, ``build``, ``node_modules``, ``vendor``: the
    whole name of a folder, not of a file or part of a name) or a bundle's name
    (``.min.js``, ``.bundle.cjs``) is built output; the rest is searched, nearest
    first. The cited file in built output searches everything."""
    changed = ChangedFiles([
        "dist/index.js", "lib/dist/x.js", "distro/a.js", "src/dist.js", "app.min.js",
        "app.min.mjs", "app.minimal.js", "vendor/x.js", "vendors/y.js", "build/z.js",
        "builder/w.js", "node_modules/m/i.js", "src/b.js", "a.bundle.cjs"])
    assert changed.ordered("src/a.js", []) == [
        "src/b.js", "src/dist.js", "app.minimal.js", "builder/w.js", "distro/a.js",
        "vendors/y.js"]
    assert changed.ordered("dist/a.js", [])[:3] == ["dist/index.js", "a.bundle.cjs",
                                                   "app.min.js"]
    assert len(changed.ordered("dist/a.js", [])) == 14


def test_built_output_is_searched_only_for_code_cited_in_built_output() -> None:
    """``dist/``, ``build/``, ``node_modules/``, ``vendor/`` and bundles are what a build
    writes or a package manager brings: not candidates for code cited in sources, not
    even by module name; candidates for code cited in them."""
    changed = ChangedFiles(["src/lib/utils.js", "dist/index.js", "dist/utils.js",
                            "node_modules/x/utils.js", "vendor/github.com/y/utils.go",
                            "web/app.min.js", "src/vendored.ts"])
    assert changed.ordered("src/install.ts", []) == ["src/lib/utils.js", "src/vendored.ts"]
    assert changed.naming("src/utils.js") == {"src/lib/utils.js": 1}
    assert changed.ordered("dist/old.js", []) == [
        "dist/index.js", "dist/utils.js", "node_modules/x/utils.js", "src/lib/utils.js",
        "src/vendored.ts", "web/app.min.js"]


def test_renamed_in_place_is_changed_even_when_a_twin_moved_elsewhere(
        history: History) -> None:
    """``Event.describe`` is renamed ``label`` where it stands. Another class in another
    file has a method reading exactly as ``describe`` did, which moved within its file in
    the same commit (so the line alignment cannot say it was there all along): a copy
    under another qualifier is not the cited method while its file still has it,
    renamed: ``changed`` there."""
    describe = "    def describe(self):\n        return f\"{self.kind}: {self.name}\"\n"
    event = "class Event:\n    kind = \"event\"\n\n" + describe + \
        "\n    def fire(self):\n        return self.kind.upper()\n"
    others = ["    def first(self):\n        return self.items[0]\n",
              "    def last(self):\n        return self.items[-1]\n",
              "    def size(self):\n        return len(self.items)\n",
              "    def empty(self):\n        return not self.items\n"]
    signal = "class Signal:\n    kind = \"signal\"\n\n" + describe + "\n" + "\n".join(others)
    history.start({"app/events.py": event, "app/signals.py": signal})
    cited = history.cite("app/events.py", *span(event, describe))
    label = describe.replace("def describe", "def label")
    history.repo.write("app/events.py", event.replace(describe, label))
    history.repo.write("app/signals.py", "class Signal:\n    kind = \"signal\"\n\n"
                       + "\n".join(others) + "\n" + describe)
    history.repo.commit("rename describe; reorder Signal")
    changed(check_one(history, cited), "app/events.py", span(event.replace(describe, label),
                                                             label))


def test_a_copy_under_another_name_that_was_in_its_file_already_is_not_the_code(
        history: History) -> None:
    """``Path.describe`` is renamed ``label`` with its recursive call (so only half its
    lines survive); ``Node.describe`` in another file reads as it did, and moved within
    its file. ``Node.describe`` was there all along: not the cited method moved; what is
    left of the method (half of it, where it stood) is ``changed``."""
    describe = ("    def describe(self):\n        if self.parent:\n"
                "            return self.parent.describe() + \"/\" + self.name\n"
                "        return self.name\n")
    others = ["    def root(self):\n        return self.parent.root() if self.parent else self\n",
              "    def depth(self):\n"
              "        return self.parent.depth() + 1 if self.parent else 0\n",
              *(f"    def get_{i}(self):\n        return self.items[{i}]\n" for i in range(6))]
    path_py = "class Path:\n    parent = None\n\n" + describe
    node_py = "class Node:\n    parent = None\n\n" + describe + "\n" + "\n".join(others)
    history.start({"app/path.py": path_py, "app/node.py": node_py})
    cited = history.cite("app/path.py", *span(path_py, describe))
    label = describe.replace("describe", "label")
    history.repo.write("app/path.py", path_py.replace(describe, label))
    history.repo.write("app/node.py", "class Node:\n    parent = None\n\n" + "\n".join(others)
                       + "\n" + describe)
    history.repo.commit("rename describe; reorder Node")
    check = check_one(history, cited)
    assert (check.outcome.value, check.location) == (
        "changed", Location("app/path.py", *span(path_py.replace(describe, label), label)))
    assert check.similarity == 0.5


def test_a_class_made_private_keeps_its_methods(history: History) -> None:
    """``KeepOpenFile`` becomes ``_KeepOpenFile`` and its constructor is rewritten: the
    constructor is still there, under the private name, so it is ``changed`` there."""
    init = "    def __init__(self, file):\n        self._file = file\n"
    text = "import io\n\n\nclass KeepOpenFile:\n" + init + \
        "\n    def __enter__(self):\n        return self\n"
    history.start({"pkg/utils.py": text})
    cited = history.cite("pkg/utils.py", *span(text, init))
    init_now = ("    def __init__(self, file: io.IOBase, *, close: bool = False) -> None:\n"
                "        self._stream = file\n        self._close = close\n")
    new = text.replace("class KeepOpenFile", "class _KeepOpenFile").replace(init, init_now)
    history.repo.write("pkg/utils.py", new)
    history.repo.commit("private helpers")
    changed(check_one(history, cited), "pkg/utils.py", span(new, init_now))


def test_a_rewrapped_definition_keeps_the_blank_line_cited_after_it(history: History) -> None:
    """A class cited with the blank line after it is re-wrapped by a formatter and moves
    down: found by its text in its definition (ladder step 4), it keeps its blank line."""
    error = 'class ProtocolError(Exception, metaclass=Registered):\n    """Malformed HTTP."""\n'
    text = "import abc\n\n\n" + error + "\n\nclass Other(Exception):\n    pass\n"
    history.start({"net/errors.py": text})
    first, last = span(text, error)
    cited = history.cite("net/errors.py", first, last + 1)
    rewrapped_error = ('class ProtocolError(\n    Exception,\n    metaclass=Registered,\n):\n'
                       '    """Malformed HTTP."""\n')
    new = "import abc\n\nREGISTRY = {}\n\n\n" + rewrapped_error + \
        "\n\nclass Other(Exception):\n    pass\n"
    history.repo.write("net/errors.py", new)
    history.repo.commit("black, a registry")
    start, end = span(new, rewrapped_error)
    moved(check_one(history, cited), "net/errors.py", (start, end + 1))


# ------------------------------------------------------------------ Rust generics renamed

_MATCH_BEFORE = """\
pub enum Match<'a> {
    None,
    Ignored(&'a Pattern),
    Whitelist(&'a Pattern),
}

impl<'a> Match<'a> {
    pub fn is_none(&self) -> bool {
        match *self {
            Match::None => true,
            Match::Ignored(_) | Match::Whitelist(_) => false,
        }
    }

    /// Inverts the match so that Ignored becomes Whitelisted.
    pub fn invert(self) -> Match<'a> {
        match self {
            Match::None => Match::None,
            Match::Ignored(pat) => Match::Whitelist(pat),
            Match::Whitelist(pat) => Match::Ignored(pat),
        }
    }
}

impl From<glob::Error> for Error {
    fn from(err: glob::Error) -> Error {
        Error::Glob(err)
    }
}
"""

_MATCH_AFTER = """\
pub enum Match<T> {
    None,
    Ignore(T),
    Whitelist(T),
}

impl<T> Match<T> {
    pub fn is_none(&self) -> bool {
        match *self {
            Match::None => true,
            Match::Ignore(_) | Match::Whitelist(_) => false,
        }
    }

    /// Inverts the match so that `Ignore` becomes `Whitelist`.
    pub fn invert(self) -> Match<T> {
        match self {
            Match::None => Match::None,
            Match::Ignore(t) => Match::Whitelist(t),
            Match::Whitelist(t) => Match::Ignore(t),
        }
    }
}

impl From<io::Error> for Error {
    fn from(err: io::Error) -> Error {
        Error::Io(err)
    }
}
"""


def test_a_rust_method_moved_to_a_crate_whose_impl_renamed_its_generics(
        history: History) -> None:
    """ripgrep's shape: ``src/gitignore.rs`` becomes the ``ignore`` crate while ``impl<'a>
    Match<'a>`` becomes ``impl<T> Match<T>`` and ``invert`` is edited. The method still
    exists, in the new file, under the impl of the same type: ``changed`` there (its
    anchor's name, ``impl Match<'a>::invert``, differs only in the type's generic
    arguments). A trait impl's arguments are not renamed parameters: ``impl
    From<glob::Error>`` is gone even though ``impl From<io::Error>`` is new, so code
    cited in it is ``missing``."""
    history.start({"src/gitignore.rs": _MATCH_BEFORE, "src/main.rs": "fn main() {}\n"})
    window = ("            Match::None => Match::None,\n"
              "            Match::Ignored(pat) => Match::Whitelist(pat),\n"
              "            Match::Whitelist(pat) => Match::Ignored(pat),\n")
    cited = history.cite("src/gitignore.rs", *span(_MATCH_BEFORE, window))
    conversion = "    fn from(err: glob::Error) -> Error {\n        Error::Glob(err)\n"
    other_impl = history.cite("src/gitignore.rs", *span(_MATCH_BEFORE, conversion))
    history.repo.run("rm", "-q", "src/gitignore.rs")
    history.repo.write("ignore/src/lib.rs", _MATCH_AFTER)
    history.repo.commit("move gitignore into the ignore crate")
    _unpaired(history, "src/gitignore.rs", "ignore/src/lib.rs")
    moved_window, gone = history.check(cited, other_impl)
    after = ("            Match::None => Match::None,\n"
             "            Match::Ignore(t) => Match::Whitelist(t),\n"
             "            Match::Whitelist(t) => Match::Ignore(t),\n")
    changed(moved_window, "ignore/src/lib.rs", span(_MATCH_AFTER, after))
    missing(gone)


# ------------------------------------------------------------------ inlined into another definition

_PATH_VALUE = """\
package chi

import "net/http"

// setPathValue sets the path values in the Request value.
func setPathValue(rctx *Context, r *http.Request) {
	for i, key := range rctx.URLParams.Keys {
		value := rctx.URLParams.Values[i]
		r.SetPathValue(key, value)
	}
}
"""

_MUX = """\
package chi

import "net/http"

func (mx *Mux) routeHTTP(w http.ResponseWriter, r *http.Request) {
	rctx := r.Context().Value(RouteCtxKey).(*Context)
	if _, _, h := mx.tree.FindRoute(rctx, rctx.RouteMethod, rctx.RoutePath); h != nil {
		setPathValue(rctx, r)
		h.ServeHTTP(w, r)
		return
	}
	mx.NotFoundHandler().ServeHTTP(w, r)
}
"""

_LOOP = """\
	for i, key := range rctx.URLParams.Keys {
		value := rctx.URLParams.Values[i]
		r.SetPathValue(key, value)
	}
"""


def test_a_function_inlined_into_another_file_takes_its_lines_along(
        history: History) -> None:
    """go-chi/chi's shape: ``setPathValue`` is deleted with its file and its loop is
    inlined into ``routeHTTP`` in ``mux.go``. The function is gone everywhere and its
    lines are in one other file only, new there: ``relocated`` into the other
    definition (its lines were the cited file's only copy of them)."""
    history.start({"path_value.go": _PATH_VALUE, "mux.go": _MUX})
    cited = history.cite("path_value.go", *span(_PATH_VALUE, _LOOP))
    inlined = _MUX.replace("\t\tsetPathValue(rctx, r)\n",
                           "\t\t// Set http.Request path values from our request context\n"
                           + _LOOP.replace("\n\t", "\n\t\t").replace("\tfor", "\t\tfor", 1))
    history.repo.run("rm", "-q", "path_value.go")
    history.repo.write("mux.go", inlined)
    history.repo.commit("inline setPathValue")
    check = check_one(history, cited)
    loop_now = _LOOP.replace("\n\t", "\n\t\t").replace("\tfor", "\t\tfor", 1)
    moved(check, "mux.go", span(inlined, loop_now))
    assert "into another definition" in (check.detail or "")


def test_lines_inlined_elsewhere_are_not_followed_where_other_files_hold_them_too(
        history: History) -> None:
    """The same move, but another changed file has held the same loop all along
    (boilerplate of the codebase): the lines are no evidence of where the function went,
    so the citation is ``missing``."""
    other = "package chi\n\nfunc (c *Context) apply(r *http.Request) {\n" + _LOOP + "}\n"
    history.start({"path_value.go": _PATH_VALUE, "mux.go": _MUX, "context.go": other})
    cited = history.cite("path_value.go", *span(_PATH_VALUE, _LOOP))
    loop_now = _LOOP.replace("\n\t", "\n\t\t").replace("\tfor", "\t\tfor", 1)
    history.repo.run("rm", "-q", "path_value.go")
    history.repo.write("mux.go", _MUX.replace("\t\tsetPathValue(rctx, r)\n", loop_now))
    history.repo.write("context.go", other + "\n// Reset clears the context.\n"
                       "func (c *Context) Reset() {}\n")
    history.repo.commit("inline setPathValue; add Reset")
    missing(check_one(history, cited))


def test_lines_copied_elsewhere_are_not_followed_while_the_definition_is_still_home(
        history: History) -> None:
    """spf13/cobra's shape: ``Command.gen_tree`` becomes a plain ``gen_tree`` in the file
    that continues its module and loses the cited lines; a new module has a function
    that starts with the same two lines. The definition is still there, by its simple
    name: the copy elsewhere is a copy, not the cited code moved."""
    method = ("    def gen_tree(self, folder):\n"
              "        identity = lambda s: s\n"
              "        empty = lambda s: \"\"\n"
              "        self.gen_tree_custom(folder, empty, identity)\n")
    helpers = "".join(f"\n\ndef helper_{i}(cmd):\n    return cmd.name + \"{i}\"\n"
                      for i in range(8))
    docs = "class Command:\n    name = \"cmd\"\n\n" + method + helpers
    history.start({"md_docs.py": docs})
    cited = history.cite("md_docs.py", *span(docs, method.splitlines(keepends=True)[1]
                                              + method.splitlines(keepends=True)[2]))
    history.repo.run("mv", "md_docs.py", "md_docs_gen.py")
    history.repo.write("md_docs_gen.py", "class Command:\n    name = \"cmd\"\n\n\n"
                       "def gen_tree(cmd, folder):\n"
                       "    return gen_tree_custom(cmd, folder, str, str)\n" + helpers)
    history.repo.write("yaml_docs.py", "def gen_yaml_tree(cmd, folder):\n"
                       "    identity = lambda s: s\n"
                       "    empty = lambda s: \"\"\n"
                       "    return gen_yaml_tree_custom(cmd, folder, empty, identity)\n")
    history.repo.commit("gen_tree becomes a function; yaml docs")
    status = history.repo.run("diff", "--name-status", "-M", history.first, "HEAD")
    assert any(line.startswith("R") and line.endswith("md_docs_gen.py")
               for line in status.splitlines()), status  # git pairs it: it continues
    check = check_one(history, cited)
    assert check.outcome.value != "relocated", check.detail


# ------------------------------------------------------------------ names that name a role

def test_a_rust_test_module_is_not_followed_into_another_files_test_module(
        history: History) -> None:
    """ripgrep's shape: a file and its ``mod tests`` are deleted while a new file of
    another crate has a ``mod tests`` of its own. ``tests`` names a role (nearly every
    Rust file has one), as ``main`` does: the other file's module is another module
    (it said ``changed`` there), so the cited one is ``missing``."""
    tests_module = ("#[cfg(test)]\n"
                    "mod tests {\n"
                    "    use super::aliases;\n\n"
                    "    #[test]\n"
                    "    fn aliases_are_sorted() {\n"
                    "        let names: Vec<&str> = aliases().map(|(name, _)| name).collect();\n"
                    "        assert!(names.windows(2).all(|w| w[0] < w[1]));\n"
                    "    }\n"
                    "}\n")
    aliases = ("pub fn aliases() -> impl Iterator<Item = (&'static str, &'static str)> {\n"
               "    ALIASES.iter().copied()\n}\n\n" + tests_module)
    history.start({"printer/src/hyperlink_aliases.rs": aliases,
                   "index/src/literal.rs": "pub fn literal(s: &str) -> bool {\n"
                                           "    !s.is_empty()\n}\n"})
    cited = history.cite("printer/src/hyperlink_aliases.rs",
                         *span(aliases, tests_module.split("\n", 1)[1]))
    history.repo.run("rm", "-q", "printer/src/hyperlink_aliases.rs")
    history.repo.write("index/src/literal.rs",
                       "pub fn literal(s: &str) -> bool {\n    !s.is_empty()\n}\n\n"
                       "#[cfg(test)]\nmod tests {\n    use super::literal;\n\n"
                       "    #[test]\n    fn empty_is_not_a_literal() {\n"
                       "        assert!(!literal(\"\"));\n    }\n}\n")
    history.repo.commit("drop the aliases; test literals")
    missing(check_one(history, cited))
