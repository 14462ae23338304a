"""``vmem dashboard``: invalidation rates, outcomes and memory health per repository, as a
page a person can open.

- ``data.py``: the numbers, read from the views every store has (``store/views.py``).
- ``detail.py``: one memory's citations, history and audit trail.
- ``charts.py``: SVG charts drawn on the server; ``page.py``: the one HTML page, its
  stylesheet and script (``static/``) inline, so a file written with ``--out`` opens
  offline; ``server.py``: the live page on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from verified_memory.dashboard.data import Dashboard, collect
from verified_memory.dashboard.detail import MemoryDetail, memory_detail, memory_details
from verified_memory.dashboard.page import render_detail_page, render_page
from verified_memory.dashboard.server import Pages

if TYPE_CHECKING:
    from verified_memory.service import MemoryService

__all__ = ["Dashboard", "MemoryDetail", "build", "pages", "render_page"]


def build(service: MemoryService, *, repos: Sequence[str] | None = None, days: int = 90,
          list_limit: int = 10, top: int = 10,
          now: datetime | None = None) -> tuple[Dashboard, list[MemoryDetail]]:
    """The dashboard's numbers, and the detail of every memory its lists show."""
    dashboard = collect(service.read_view, repos=repos, days=days, now=now,
                        expire_days=service.policy.expire_days, top=top,
                        list_limit=list_limit, where=repr(service.memories))
    listed = [row.id for repo in dashboard.repos for listing in repo.lists
              for row in listing.rows]
    return dashboard, memory_details(service, listed)



def pages(service: MemoryService, *, repos: Sequence[str] | None = None, days: int = 90,
          list_limit: int = 10, now: datetime | None = None) -> Pages:
    """What the live server shows: the dashboard (a request's ``repo`` and ``days``
    instead of these when it names them), and one memory's page."""
    from verified_memory.models import validate_repo

    def dashboard(asked: list[str] | None, asked_days: int | None) -> str:
        chosen = [validate_repo(r) for r in asked] if asked else repos
        return render_page(*build(service, repos=chosen, list_limit=list_limit, now=now,
                                  days=days if asked_days is None else asked_days))

    return Pages(dashboard, lambda memory_id: render_detail_page(
        memory_detail(service, memory_id)))
