"""The package's layout holds: imports only run from a layer to the layers below it, no
module outgrows 400 lines, and the product speaks about what holds now (no issue numbers
of its own, no words about how the work was organised)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "psijax"

# Bottom to top: a module may import its own layer and the layers before it, never one after.
# docs/architecture.md draws the same picture.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("psijax.types", "psijax.errors", "psijax.precision"),
    ("psijax.registry", "psijax.config"),
    ("psijax.statistics", "psijax.system", "psijax.parallel", "psijax.runtime"),
    ("psijax.laplacian", "psijax.ansatz"),
    ("psijax.hamiltonian", "psijax.sampling", "psijax.optim"),
    ("psijax.estimators",),
    ("psijax.rundir", "psijax.eigenstates"),
    ("psijax.run",),
    ("psijax.training",),
    ("psijax.wavefunction",),
    ("psijax.evaluation",),
    ("psijax.curves",),
    ("psijax.cli", "psijax"),
)


def layer_of(module: str) -> int:
    best, depth = None, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and prefix.count(".") > depth:
                best, depth = index, prefix.count(".")
    assert best is not None, f"{module} is in no layer; add it to LAYERS"
    return best


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, module) of every psijax import in ``path`` (or ``source`` as if it were that
    file), at any depth (function bodies included, TYPE_CHECKING blocks excluded: they
    never run)."""
    tree = ast.parse(path.read_text() if source is None else source)
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found = []
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("psijax")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            if not base.startswith("psijax"):
                continue
            for alias in node.names:  # `from psijax import hamiltonian` imports a module
                name = f"{base}.{alias.name}"
                found.append((node.lineno, name if _is_module(name) else base))
    return found


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_imports_only_run_down_the_layers():
    upward = []
    for path in MODULES:
        here = module_name(path)
        for line, target in imports_of(path):
            if layer_of(target) > layer_of(here):
                upward.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not upward, "imports from a lower layer back up:\n" + "\n".join(upward)


def test_the_layer_check_sees_an_upward_import():
    """The check itself: a module of a low layer importing the training job is caught,
    also when the import sits inside a function, and a relative import is resolved."""
    probe = PACKAGE / "sampling" / "probe.py"
    source = "def f():\n    from psijax.training import job\n    from ..run import loop\n"
    assert imports_of(probe, source) == [(2, "psijax.training.job"), (3, "psijax.run.loop")]
    assert layer_of("psijax.sampling.probe") < layer_of("psijax.training.job")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph`` (module -> modules it imports): its strongly connected
    components of more than one module, each sorted (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_two_modules_import_each_other():
    """No import cycle in the package, lazy imports in function bodies included (a module
    importing a package imports the package's ``__init__``: a name it re-exports)."""
    modules = {module_name(p) for p in MODULES}
    graph = {
        module_name(p): {t for _, t in imports_of(p) if t in modules and t != module_name(p)}
        for p in MODULES
    }
    assert not cycles(graph), "import cycles:\n" + "\n".join(map(str, cycles(graph)))


def test_the_cycle_check_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_outgrows_400_lines(path):
    assert len(path.read_text().splitlines()) <= 400


# Words about how the work was organised, and issue numbers of this project's own tracker.
# A citation of another project's issue names that project first ("NetKet issue 2260").
OTHER_PROJECTS = {"NetKet", "JAX", "jax", "folx", "FermiNet", "ferminet", "jaqmc", "DeepQMC",
                  "pyscf", "XLA", "optax", "orbax", "GitHub", "github"}  # fmt: skip
_WORDS = re.compile(
    r"(?P<before>[\w.-]+ )?\b(?:issue|Issue) #?\d+|\(issue:|\bthis session\b|"
    r"\bprevious session\b|\bstop \d+\b|\bhelper-\d+\b"
)


class _ProcessWords:
    """``search(line)``: a process word, or an issue number not of another project."""

    def search(self, line: str) -> bool:
        for match in _WORDS.finditer(line):
            before = (match.group("before") or "").strip()
            if before not in OTHER_PROJECTS:
                return True
        return False


PROCESS_WORDS = _ProcessWords()
TEXT_FILES = [
    *MODULES, *sorted((ROOT / "tests").glob("*.py")), *sorted((ROOT / "benchmarks").rglob("*.py")),
    *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*.py")),
    ROOT / "README.md",
]  # fmt: skip


def test_the_product_speaks_of_what_holds_now():
    found = []
    for path in TEXT_FILES:
        if path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if PROCESS_WORDS.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_process_words_check_can_fail():
    assert PROCESS_WORDS.search("as measured in issue 13")
    assert PROCESS_WORDS.search("(issue: the VMC system)")
    assert PROCESS_WORDS.search("figures from this session")
    assert not PROCESS_WORDS.search("JAX 0.11 refuses them (NetKet issue 2260)")
