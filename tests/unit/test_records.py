"""`@record` (pipeline/records.py): the same dataclass as `@dataclass`, made on first use."""

from __future__ import annotations

import dataclasses
import importlib
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pipeline.records import FIELDS, record

PACKAGE = Path(__file__).resolve().parents[2] / "pipeline"


def record_classes() -> list[tuple[str, str]]:
    """(module, class) of every `@record` class in the package, read from its source."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        for name in re.findall(r"^@record(?:\(.*\))?\nclass (\w+)", text, flags=re.M):
            module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
            found.append((module, name))
    return found


def test_the_package_has_records():
    assert len(record_classes()) >= 5


def test_importing_the_records_makes_none_of_them():
    """The point: a command that builds none pays for none (a fresh process, nothing used)."""
    modules = sorted({module for module, _ in record_classes()})
    script = (
        "import importlib, sys\n"
        f"classes = {record_classes()!r}\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "made = [f'{m}.{c}' for m, c in classes\n"
        f"        if type(vars(getattr(sys.modules[m], c)).get({FIELDS!r})) is dict]\n"
        "print(made)\n"
    )
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]"


@pytest.mark.parametrize(("module", "name"), record_classes())
def test_each_record_is_made_into_its_dataclass_on_first_use(module, name):
    cls = getattr(importlib.import_module(module), name)
    assert dataclasses.is_dataclass(cls)  # asking is a first use
    assert type(vars(cls)[FIELDS]) is dict and "__init__" in vars(cls)
    # its fields: a dataclass base's first (contract.article.ArticleState is a store record's), then its own
    inherited = [
        f.name
        for base in cls.__mro__[-1:0:-1]
        if dataclasses.is_dataclass(base)
        for f in dataclasses.fields(base)
    ]
    own = [n for n, kind in vars(cls).get("__annotations__", {}).items() if "ClassVar" not in str(kind)]
    hints = list(dict.fromkeys(inherited + own))
    assert [f.name for f in dataclasses.fields(cls)] == hints
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"  # dataclass's own, generated


def _fresh(maker):
    """The same class body, decorated by `maker`."""

    class Sample:
        """A sample."""

        name: str
        count: int = 0
        tags: list[str] = dataclasses.field(default_factory=list)

        def shout(self) -> str:
            return self.name.upper()

    return maker(Sample)


@pytest.mark.parametrize(
    "options", [{}, {"frozen": True}, {"eq": False}, {"order": True}, {"kw_only": True}, {"repr": False}]
)
def test_a_record_behaves_as_the_dataclass_of_the_same_options(options):
    lazy, eager = _fresh(record(**options)), _fresh(dataclasses.dataclass(**options))
    first, model = lazy(name="a", count=2), eager(name="a", count=2)
    if options.get("repr", True):
        assert repr(first) == repr(model) == "_fresh.<locals>.Sample(name='a', count=2, tags=[])"
    assert dataclasses.astuple(first) == dataclasses.astuple(model) == ("a", 2, [])
    assert dataclasses.asdict(first) == dataclasses.asdict(model)
    assert [(f.name, f.default) for f in dataclasses.fields(lazy)] == [
        (f.name, f.default) for f in dataclasses.fields(eager)
    ]
    assert (first == lazy(name="a", count=2)) is (model == eager(name="a", count=2))
    changed = dataclasses.replace(first, count=3)
    assert changed.count == 3 and type(changed) is lazy and changed.shout() == "A"
    assert lazy(name="b").tags is not lazy(name="c").tags  # a fresh default each time
    assert lazy.__doc__ == eager.__doc__ == "A sample."
    assert lazy.__match_args__ == eager.__match_args__
    assert (lazy.__hash__ is None) is (eager.__hash__ is None)
    if options.get("frozen"):
        assert hash(lazy("a", 2, ())) == hash(eager("a", 2, ()))  # by value (a list is unhashable)
        with pytest.raises(dataclasses.FrozenInstanceError):
            first.count = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        lazy(nope=1)


def test_fields_of_an_unmade_class_make_it():
    lazy = _fresh(record)
    assert [f.name for f in dataclasses.fields(lazy)] == ["name", "count", "tags"]
    assert lazy("x").count == 0


def test_subclasses_build_through_the_made_init():
    base = _fresh(record)

    class Plain(base):  # a plain subclass calling the record's __init__ through super()
        def __init__(self, name: str) -> None:
            super().__init__(name, 5)
            self.extra = True

    made = Plain("p")
    assert (made.name, made.count, made.extra) == ("p", 5, True)

    @record
    class Child(_fresh(record)):
        more: int = 1

    assert [f.name for f in dataclasses.fields(Child)] == ["name", "count", "tags", "more"]
    assert Child("c", more=2).more == 2


def test_threads_building_the_first_instances_make_the_class_once(monkeypatch):
    lazy, made = _fresh(record), []
    real = dataclasses.dataclass

    def counting(cls, **options):
        made.append(cls)
        return real(cls, **options)

    monkeypatch.setattr(dataclasses, "dataclass", counting)
    threads = [threading.Thread(target=lambda: lazy("t")) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert made == [lazy]


@pytest.mark.parametrize("options", [{"slots": True}])
def test_what_cannot_be_made_lazily_is_refused(options):
    with pytest.raises(TypeError, match="slotted"):
        _fresh(record(**options))
    with pytest.raises(TypeError, match="own __init__"):

        @record
        class Own:
            def __init__(self) -> None:
                pass
