"""The import rules of pipeline/, read from the source (ast: no tool beyond Python).

Every import counts: at module level, inside a function, under `if TYPE_CHECKING:`.
- no circle among pipeline's modules;
- no circle among its top-level packages and modules (batch, setup, wiring, ...): a package
  may import another only if that one imports nothing of it back, through any of their modules;
- layers, each importing only from the layers below it (a layer's packages may import each
  other as long as that makes no circle): the commands (cli, entry, __main__), then what they
  run (batch, setup, publishing, wiring), the contract, the engines and the store, and at the
  bottom the shared modules (config, files, console, ...);
- the simulator imports no engine, nothing of the contract, the store or the commands: only
  itself and the bottom layer;
- no module imports a private name (`_name`) of another package's module;
- the contract names no concrete store: of pipeline/store/ it imports the protocol alone
  (pipeline/wiring.py opens the store a config gets and hands it in).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pipeline

# Top-level names of pipeline (its packages and modules; "" is pipeline/__init__.py), highest first.
LAYERS: list[tuple[str, frozenset[str]]] = [
    ("commands", frozenset({"cli", "entry", "__main__"})),
    ("runs", frozenset({"batch", "setup", "publishing", "wiring"})),
    ("contract", frozenset({"contract"})),
    ("engines and store", frozenset({"engines", "store", "simulator", "signin"})),
    (
        "shared",
        frozenset(
            {"", "config", "files", "console", "redact", "errors", "exitcodes", "times"}
            | {"accounts", "proxy", "crashpoints", "languages", "known_secrets", "pathguard", "send_hours"}
            | {"records"}
        ),
    ),
]
SIMULATOR = "simulator"


@dataclass(frozen=True)
class Edge:
    source: str  # the importing module
    target: str  # the imported module
    path: Path
    line: int

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package at `root`, by dotted name (a package by its __init__)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(root: Path, package: str) -> list[Edge]:
    """Every import of one of the package's modules by another, wherever it is written."""
    known = modules(root, package)
    edges = []
    for name, path in known.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                start = ".".join(base + ([node.module] if node.module else []))
                # `from a import b`: the module a.b when there is one, else a name of a
                targets = [
                    f"{start}.{alias.name}" if f"{start}.{alias.name}" in known else start
                    for alias in node.names
                ]
            else:
                continue
            for target in targets:
                while target and target not in known:  # `import a.b.c` of a name: the module a.b
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.append(Edge(name, target, path, node.lineno))
    return edges


def circles(edges: list[Edge]) -> list[list[Edge]]:
    """The imports inside each circle (a strongly connected set of two or more modules)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for start in sorted(graph):  # Tarjan's algorithm, without recursion
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(group)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return [[e for e in edges if e.source in group and e.target in group] for group in groups]


def top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_of(module: str) -> int | None:
    return next((i for i, (_, names) in enumerate(LAYERS) if top(module) in names), None)


def layer_problems(edges: list[Edge]) -> list[str]:
    """One line per import that breaks the layers: the file and line, the import, the rule."""
    problems = []
    for edge in edges:
        source, target = layer_of(edge.source), layer_of(edge.target)
        if source is None or target is None:
            stray = edge.source if source is None else edge.target
            problems.append(f"{edge.where()}: {stray} is in no layer: add {top(stray)!r} to LAYERS")
        elif top(edge.source) == SIMULATOR and top(edge.target) not in (SIMULATOR, *LAYERS[-1][1]):
            problems.append(
                f"{edge.where()}: {edge.source} imports {edge.target}: the simulator imports only "
                f"itself and the {LAYERS[-1][0]} layer (no engine, contract, store or command)"
            )
        elif target < source:
            problems.append(
                f"{edge.where()}: {edge.source} imports {edge.target}: the {LAYERS[source][0]} layer "
                f"imports only from the layers below it, and {LAYERS[target][0]} is above"
            )
    return problems


def package_edges(edges: list[Edge]) -> list[Edge]:
    """The imports between pipeline's top-level packages and modules (each named by itself, e.g.
    pipeline.batch for every module of batch/): one per import that crosses from one to another."""
    return [
        Edge(f"pipeline.{top(e.source)}".rstrip("."), f"pipeline.{top(e.target)}".rstrip("."), e.path, e.line)
        for e in edges
        if top(e.source) != top(e.target)
    ]


def circle_problems(edges: list[Edge]) -> list[str]:
    return [
        "import circle among "
        + ", ".join(sorted({e.source for e in circle}))
        + ":\n"
        + "\n".join(f"  {e.where()}: {e.source} imports {e.target}" for e in circle)
        for circle in circles(edges)
    ]


def private_imports(root: Path, package: str) -> list[str]:
    """One line per `from a.b import _name` of a module of another package (a.b's package is not
    the importer's): a private name is its own package's business."""
    known = modules(root, package)
    problems = []
    for name, path in known.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = here[: len(here) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            if source not in known or not source.startswith(package):
                continue
            owner = source.split(".") if known[source].name == "__init__.py" else source.split(".")[:-1]
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and owner != here:
                    problems.append(
                        f"{path}:{node.lineno}: {name} imports {alias.name} of {source}: a private name "
                        f"of another package (make it public there, or ask {source} for what it does)"
                    )
    return problems


def pipeline_edges() -> list[Edge]:
    root = Path(pipeline.__file__).parent
    return [
        Edge(e.source, e.target, e.path.relative_to(root.parent), e.line) for e in imports(root, "pipeline")
    ]


def test_no_module_of_pipeline_imports_itself_back_in_a_circle():
    problems = circle_problems(pipeline_edges())
    assert not problems, "\n".join(problems)


def test_no_package_of_pipeline_imports_itself_back_in_a_circle():
    """Every top-level package and module of pipeline/ (enumerated from the files, each a node)
    imports none that imports it back, however many packages the circle passes through."""
    edges = pipeline_edges()
    assert {top(e.source) for e in edges} >= {"batch", "setup", "wiring", "contract", "cli"}
    problems = circle_problems(package_edges(edges))
    assert not problems, "\n".join(problems)


def test_each_layer_imports_only_from_the_layers_below_it():
    problems = layer_problems(pipeline_edges())
    assert not problems, "\n".join(problems)


STORE_PROTOCOL = "pipeline.store.protocol"


def concrete_store_imports(edges: list[Edge]) -> list[str]:
    """One line per import of pipeline/store/ by the contract other than of its protocol."""
    return [
        f"{e.where()}: {e.source} imports {e.target}: the contract knows stores by their protocol "
        f"({STORE_PROTOCOL}) only; open a store in pipeline/wiring.py and hand it in"
        for e in edges
        if top(e.source) == "contract" and top(e.target) == "store" and e.target != STORE_PROTOCOL
    ]


def test_the_contract_names_no_concrete_store():
    problems = concrete_store_imports(pipeline_edges())
    assert not problems, "\n".join(problems)


def fake_pipeline(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package `pipeline` under `tmp_path` of `files` (path inside it: source), each folder
    with its __init__.py: what the rules' own tests check them on."""
    package = tmp_path / "pipeline"
    for name, source in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in (path.parent, *path.parent.parents):
            (folder / "__init__.py").touch()
            if folder == package:
                break
        path.write_text(source)
    return package


def test_an_import_of_a_concrete_store_by_the_contract_is_found(tmp_path):
    package = fake_pipeline(
        tmp_path,
        {
            "store/protocol.py": "",
            "store/sqlite.py": "",
            "contract/hosts.py": (
                "from ..store.protocol import Store\ndef f():\n    from ..store.sqlite import SQLiteStore\n"
            ),
        },
    )
    assert concrete_store_imports(imports(package, "pipeline")) == [
        f"{package / 'contract/hosts.py'}:3: pipeline.contract.hosts imports pipeline.store.sqlite: the "
        "contract knows stores by their protocol (pipeline.store.protocol) only; open a store in "
        "pipeline/wiring.py and hand it in"
    ]


def test_no_module_imports_a_private_name_of_another_package():
    root = Path(pipeline.__file__).parent
    problems = private_imports(root, "pipeline")
    assert not problems, "\n".join(problems)


def test_the_rules_see_imports_inside_functions_and_under_type_checking(tmp_path):
    """The checks themselves: a circle closed only by an import in a function and one under
    TYPE_CHECKING is found, named with its lines; so is an import upward and one of the
    simulator's into an engine."""
    package = fake_pipeline(
        tmp_path,
        {
            "config.py": "def load():\n    from .contract import step\n",
            "contract/step.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..config import load\n"
            ),
            "engines/base.py": "from pipeline.config import load\n",
            "simulator/api.py": "import pipeline.engines.base\n",
            "contract/quota.py": (
                "def f():\n    from .step import _near\n    from ..engines.base import _far\n"
            ),
        },
    )
    edges = imports(package, "pipeline")
    assert circle_problems(edges) == [
        "import circle among pipeline.config, pipeline.contract.step:\n"
        f"  {package / 'config.py'}:2: pipeline.config imports pipeline.contract.step\n"
        f"  {package / 'contract/step.py'}:3: pipeline.contract.step imports pipeline.config"
    ]
    assert sorted(layer_problems(edges)) == [
        f"{package / 'config.py'}:2: pipeline.config imports pipeline.contract.step: the shared layer "
        "imports only from the layers below it, and contract is above",
        f"{package / 'simulator/api.py'}:1: pipeline.simulator.api imports pipeline.engines.base: the "
        "simulator imports only itself and the shared layer (no engine, contract, store or command)",
    ]
    assert private_imports(package, "pipeline") == [
        f"{package / 'contract/quota.py'}:3: pipeline.contract.quota imports _far of "
        "pipeline.engines.base: a private name of another package (make it public there, or ask "
        "pipeline.engines.base for what it does)"
    ]


def test_a_circle_between_packages_is_found_though_no_modules_make_one(tmp_path):
    """batch.status imports setup.login in a function, setup.doctor imports batch.alerts under
    TYPE_CHECKING: no circle of modules, one of packages, named with its lines."""
    package = fake_pipeline(
        tmp_path,
        {
            "batch/status.py": "def f():\n    from ..setup import login\n",
            "batch/alerts.py": "",
            "setup/login.py": "",
            "setup/doctor.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..batch.alerts import shown\n"
            ),
        },
    )
    edges = imports(package, "pipeline")
    assert circle_problems(edges) == []
    assert circle_problems(package_edges(edges)) == [
        "import circle among pipeline.batch, pipeline.setup:\n"
        f"  {package / 'batch/status.py'}:2: pipeline.batch imports pipeline.setup\n"
        f"  {package / 'setup/doctor.py'}:3: pipeline.setup imports pipeline.batch"
    ]
