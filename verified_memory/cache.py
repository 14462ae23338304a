"""``BoundedCache``: the one small bounded map the package keeps things in.

Trees, blobs, parsed definitions, anchors and diffs are cached per run, keyed by what
never changes (an object id, a path at a commit), so an entry never goes stale: the
bound only keeps a long-lived process (an MCP server, a bulk check over a long history)
from growing without end. The least recently used entry goes first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["BoundedCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """At most ``max_items`` entries and, with ``weigh``, at most ``max_weight`` of their
    weights together (an entry heavier than that alone is not kept). Thread-safe."""

    def __init__(self, max_items: int | None = None, *, max_weight: int | None = None,
                 weigh: Callable[[V], int] | None = None) -> None:
        if max_items is None and max_weight is None:
            raise ValueError("a bounded cache needs max_items or max_weight")
        if (max_weight is None) != (weigh is None):
            raise ValueError("max_weight and weigh go together")
        self.max_items = max_items
        self.max_weight = max_weight
        self._weigh = weigh
        self._data: OrderedDict[K, V] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value kept under ``key`` (now the most recently used), or None (absent,
        or a kept None: ``get_or_compute`` tells the two apart)."""
        with self._lock:
            value = self._data.get(key)
            if key in self._data:
                self._data.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` under ``key`` unless an entry is there already; the value kept
        (so that two threads computing the same entry agree on one)."""
        weight = self._weigh(value) if self._weigh is not None else 0
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
            if self.max_weight is not None and weight > self.max_weight:
                return value
            self._data[key] = value
            self._weight += weight
            while ((self.max_items is not None and len(self._data) > self.max_items)
                   or (self.max_weight is not None and self._weight > self.max_weight)):
                _, dropped = self._data.popitem(last=False)
                if self._weigh is not None:
                    self._weight -= self._weigh(dropped)
            return value

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> V:
        """The value under ``key``, computed (outside the lock) and kept when missing;
        a kept ``None`` counts as kept."""
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        return self.put(key, compute())

    def pop(self, key: K) -> V | None:
        """Forget ``key``; the value it had, or None."""
        with self._lock:
            if key not in self._data:
                return None
            value = self._data.pop(key)
            if self._weigh is not None:
                self._weight -= self._weigh(value)
            return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._weight = 0

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)
