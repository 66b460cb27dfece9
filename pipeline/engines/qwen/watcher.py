"""One watcher of a kind per page: what the engine notes of a page's own events (its traffic,
its bot checks), started on first use and stopped with the page. A subclass has its own table."""

from __future__ import annotations

import weakref
from typing import Any, ClassVar, TypeVar

W = TypeVar("W", bound="PageWatcher")


class PageWatcher:
    _watching: ClassVar[weakref.WeakKeyDictionary[Any, PageWatcher]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._watching = weakref.WeakKeyDictionary()  # a page's watcher goes with the page

    def __init__(self, page: Any):
        self._page = page

    @classmethod
    def of(cls: type[W], page: Any) -> W:
        """The watcher of `page`, started now if it had none (it notes events from then on)."""
        found = cls._watching.get(page)
        if found is None:
            found = cls._watching[page] = cls(page)
        return found  # type: ignore[return-value]

    @classmethod
    def stop(cls, page: Any) -> None:
        found = cls._watching.pop(page, None)
        if found is not None:
            found.close()

    def close(self) -> None:
        """Stop listening to the page's events."""
