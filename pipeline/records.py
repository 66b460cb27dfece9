"""`@record`: a dataclass made on its first use instead of at import.

`@dataclass` writes and compiles each class's methods with `exec` when its module is imported:
0.4 to 1 ms a class. A command imports dozens of classes it never builds (a warm `status --json`
builds none of the store's events nor the notifications), and those milliseconds are most of
what it costs above `import typer` (docs/performance.md, "Fifth pass on item 2"). A `@record` class is the
same dataclass, made by `dataclasses.dataclass` itself with the same options, the first time
anything needs it: an instance built, or its fields asked for (`dataclasses.fields`,
`is_dataclass`, a dataclass subclass). From then on it is that dataclass, nothing in between.

Not for `slots=True` (a slotted dataclass is a new class object, which the names bound at
import would not see), nor a class that writes its own `__init__`. An instance unpickled in a
process that never built one would find its class unmade: no record here is pickled.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T", bound=type)

FIELDS = "__dataclass_fields__"  # what dataclasses.fields/replace/asdict/is_dataclass read
_making = threading.RLock()  # two threads building the first instance: the class is made once


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: T | None = None, /, **options: Any) -> Any:
    """`@record` or `@record(frozen=True, ...)`: `@dataclass` with the same options, applied
    when the class is first used."""
    if options.get("slots"):
        raise TypeError("@record cannot make a slotted dataclass lazily: use @dataclass(slots=True)")

    def wrap(cls: T) -> T:
        if "__init__" in cls.__dict__:
            raise TypeError(f"@record {cls.__name__} writes its own __init__: use @dataclass")

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            """The placeholder: makes the dataclass, then builds through its own __init__ (this
            class's, not type(self)'s: a subclass may be calling it through super())."""
            _make(cls)
            cls.__init__(self, *args, **kwargs)  # type: ignore[misc]

        cls.__init__ = __init__  # type: ignore[misc]
        setattr(cls, FIELDS, _Unmade(cls, options))
        return cls

    return wrap if cls is None else wrap(cls)


def _make(cls: type) -> None:
    with _making:
        unmade = cls.__dict__.get(FIELDS)
        if not isinstance(unmade, _Unmade):
            return  # another thread made it
        del cls.__init__  # type: ignore[misc]  # dataclass writes __init__ only where none is
        delattr(cls, FIELDS)
        made = dataclasses.dataclass(cls, **unmade.options)
        assert made is cls  # not slotted: the same class, completed in place


class _Unmade:
    """The class's `__dataclass_fields__` until it is made: reading it makes the class."""

    def __init__(self, cls: type, options: dict[str, Any]) -> None:
        self.cls, self.options = cls, options

    def __get__(self, instance: object, owner: type | None = None) -> dict[str, dataclasses.Field]:
        _make(self.cls)
        return self.cls.__dict__[FIELDS]
