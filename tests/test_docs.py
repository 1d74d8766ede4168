"""Every ```python block of README.md and docs/*.md runs as written.

Each page's blocks run top to bottom in one namespace (``exec``), in a temporary directory
of their own where the examples write ``runs/``; one test per page. What the test adds, and
nothing else:

- ``OVERRIDES``: the pages whose examples train or evaluate at full size (README.md,
  docs/states.md, docs/evaluation.md) get a tiny network and a few steps: the keywords
  below replace the block's own in its calls of ``psijax.train`` and ``psijax.evaluate``.
  docs/api.md's examples are tiny already and run with none.
- docs/curves.md's ``psijax.scan`` gets a tiny config (``SCAN_TINY``) and its first three
  points; its ``psijax.relax`` the same config and one cycle.
- ``NEEDS_H2_RUN``: pages whose examples read the run their shell commands make
  (``psijax train --system H2 ... --out runs/h2``) find a tiny H2 run there, trained once
  per test process.

Blocks that reproduce an upstream JAX or folx defect (docs/compatibility.md) carry the info
string ``python reproducer``. By design they end the process (folx's ``exit()``), raise,
or deadlock XLA's CPU pool, and several need fake devices set before JAX starts or
command-line arguments. Run here, they would fail, hang, or pass only if this test caught
what they show, which would make a passing test mean nothing; so they are compiled (their
syntax checked), not run. What they show is recorded on the page with the versions it was
observed on, and psijax's workarounds have tests of their own (tests/test_laplacian_matrix.py,
tests/test_cpu_lapack.py, tests/test_folx_indices.py). Every other block whose info string
starts with ``py`` must be plain ``python``: no block escapes both kinds of check.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import types
from pathlib import Path

import pytest

import psijax

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN, REPRODUCER = "python", "python reproducer"

TINY = dict(
    layers=[[8, 4]], determinants=1, walkers=16, pretrain_steps=5, burn_in_steps=5,
    mcmc_moves=2, progress=False,
)  # fmt: skip
# page: (keywords for psijax.train, keywords for psijax.evaluate), replacing the block's own
OVERRIDES: dict[str, tuple[dict, dict]] = {
    "README.md": (TINY | {"steps": 20}, {"steps": 20, "burn_in": 5, "progress": False}),
    "docs/states.md": (TINY | {"steps": 20}, {}),
    "docs/evaluation.md": ({}, {"steps": 20, "burn_in": 5, "progress": False}),
}
NEEDS_H2_RUN = {"docs/tutorial.md", "docs/outputs.md", "docs/evaluation.md"}
# docs/curves.md's scan: its config made tiny, its first three points
SCAN_TINY = {k: v for k, v in TINY.items() if k != "progress"} | {"steps": 10}


@dataclasses.dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # of the opening fence
    info: str  # the fence's info string
    body: str
    section: str  # the heading above it

    @property
    def reproducer(self) -> bool:
        return self.info == REPRODUCER


def fenced_blocks(path: Path, page: str | None = None) -> list[Block]:
    """Every fenced block of ``path`` (named ``page``: by default its path in the repository)
    whose info string starts with ``py``."""
    page = page or str(path.relative_to(ROOT))
    blocks, section, fence = [], "", None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if fence is None:
            if line.startswith("```"):
                fence = (number, line[3:].strip(), [])
            elif line.startswith("#"):
                section = line
        elif line.strip() == "```":
            start, info, body = fence
            if info.startswith("py"):
                blocks.append(Block(page, start, info, "\n".join(body) + "\n", section))
            fence = None
        else:
            fence[2].append(line)
    return blocks


BLOCKS = [block for page in PAGES for block in fenced_blocks(page)]
RUNNABLE = {page: [b for b in BLOCKS if b.page == page and not b.reproducer] for page in
            dict.fromkeys(b.page for b in BLOCKS)}  # fmt: skip
RUNNABLE = {page: blocks for page, blocks in RUNNABLE.items() if blocks}
REPRODUCERS = [b for b in BLOCKS if b.reproducer]


def test_every_python_block_is_run_or_marked():
    assert {b.info for b in BLOCKS} <= {RUN, REPRODUCER}, [
        f"{b.page}:{b.line}: ```{b.info}" for b in BLOCKS if b.info not in (RUN, REPRODUCER)
    ]
    assert "README.md" in RUNNABLE and "docs/api.md" in RUNNABLE
    assert len(REPRODUCERS) >= 9  # docs/compatibility.md's scripts


def test_the_block_reader_sees_info_strings_and_sections(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# A\n```python\nx = 1\n# not a heading\n```\n## B\n```python reproducer\nexit()\n```\n"
        "```bash\nls\n```\n"
    )
    blocks = fenced_blocks(page, "page.md")
    assert [(b.info, b.body, b.section) for b in blocks] == [
        ("python", "x = 1\n# not a heading\n", "# A"),
        ("python reproducer", "exit()\n", "## B"),
    ]
    assert [b.reproducer for b in blocks] == [False, True]


@pytest.mark.parametrize("block", REPRODUCERS, ids=lambda b: f"{b.page}:{b.line}")
def test_reproducers_parse(block):
    compile(block.body, f"{block.page}:{block.line}", "exec")


@pytest.fixture(scope="session")
def h2_run(tmp_path_factory):
    """A tiny H2 run, standing in for the pages' ``psijax train --system H2 --out runs/h2``."""
    out = tmp_path_factory.mktemp("h2") / "h2"
    psijax.train(system="H2", steps=20, out=str(out), **TINY)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(RUNNABLE))
def test_page_examples_run(page, tmp_path, monkeypatch, capsys, request):
    monkeypatch.chdir(tmp_path)  # the examples write runs/ here
    if page in NEEDS_H2_RUN:
        shutil.copytree(request.getfixturevalue("h2_run"), tmp_path / "runs" / "h2")
    train_with, evaluate_with = OVERRIDES.get(page, ({}, {}))
    train, evaluate = psijax.train, psijax.evaluate
    if train_with:
        monkeypatch.setattr(psijax, "train", lambda *a, **kw: train(*a, **(kw | train_with)))
    if evaluate_with:
        monkeypatch.setattr(
            psijax, "evaluate", lambda *a, **kw: evaluate(*a, **(kw | evaluate_with))
        )
    if page == "docs/curves.md":
        from psijax import config as config_lib
        from psijax.curves import RelaxSettings

        scan = psijax.scan
        tiny = lambda config, points, out, **kw: scan(
            config_lib.from_dict(SCAN_TINY, config), points[:3], out, **(kw | {"progress": False})
        )
        monkeypatch.setattr(psijax, "scan", tiny)
        relax = psijax.relax
        one_cycle = lambda config, out, settings=None, **kw: relax(
            config_lib.from_dict(SCAN_TINY, config), out,
            dataclasses.replace(settings or RelaxSettings(), max_cycles=1, force_tolerance=0.5),
            **(kw | {"progress": False}),
        )  # fmt: skip
        monkeypatch.setattr(psijax, "relax", one_cycle)
    module = types.ModuleType("docs_example")  # a module of its own, as a script has
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for block in RUNNABLE[page]:
        exec(compile(block.body, f"{page}:{block.line}", "exec"), module.__dict__)
    if page == "docs/api.md":
        assert (tmp_path / "runs" / "h2-api" / "summary.json").is_file()
        assert "-8.070548" in capsys.readouterr().out
    if page == "README.md":
        assert (tmp_path / "runs" / "h2" / "eval" / "summary.json").is_file()
