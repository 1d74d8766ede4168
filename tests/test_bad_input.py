"""Bad input, nothing lost: every malformed input to `psijax train` ends in one line and exit 2.

Each case runs `psijax.cli.main` in-process, in a directory that already holds a previous run
(and the case's input files). Afterwards every file there must have the same bytes and mtime,
and no file or directory may have appeared: a failed run that leaves a half-written run
directory behind would make the corrected rerun refuse to start ("already holds a run").

Every case uses tiny settings, so a case that wrongly starts training still ends in seconds
(there is no pytest-timeout here). To add a case, append a `Case` to `CASES`.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

import psijax
from psijax.cli import main

from runs import orbax_read_noise

PREVIOUS = "previous-run"  # a finished run that no bad input may touch
NEW_OUT = "new-run"  # the --out of every case unless the case gives its own
PAST_NS = 1_000_000_000 * 10**9  # mtime of every file written before the call (2001)
TINY_CONFIG = "layers = [[8, 4]]\n"
TINY = [
    "--system", "H2", "--steps", "2", "--walkers", "8", "--pretrain-steps", "0",
    "--burn-in-steps", "0", "--mcmc-moves", "1", "--determinants", "1", "--quiet",
]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Case:
    """One malformed input and the error line it must produce.

    `args(tmp)` gives the flags after the tiny defaults (later flags win, so a case can
    override --system, --out, --config, ...); `tmp` is the directory the case runs in.
    `problem` and `fix` are substrings of the error line: one names what is wrong (the bad
    value or field), the other says what to do. `setup(tmp)` writes the case's input files.
    `xfail` is the reason a case is known to fail today (strict: it must fail).
    """

    id: str
    args: Callable[[Path], list[str]]
    problem: str
    fix: str
    setup: Callable[[Path], None] | None = None
    xfail: str | None = None


def flags(*args: str) -> Callable[[Path], list[str]]:
    return lambda tmp: list(args)


def path_flag(flag: str, name: str) -> Callable[[Path], list[str]]:
    """`flag <tmp>/name`: a file the case's setup wrote (or deliberately did not)."""
    return lambda tmp: [flag, str(tmp / name)]


def write(name: str, content: str | bytes) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        path = tmp / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)

    return setup


REAL = "real-run"  # a copy of a genuine finished run with checkpoints, made once per session
_REAL_CACHE: dict[str, Path] = {}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _genuine_run(**changes) -> Path:
    """A finished run with the settings of `TINY` + tiny.toml (so that resuming it with the
    tiny flags changes nothing), made once per variant."""
    key = json.dumps(changes, sort_keys=True)
    if key not in _REAL_CACHE:
        root = Path(tempfile.mkdtemp(prefix="psijax-real-run-"))
        settings = dict(
            system="H2", layers=((8, 4),), determinants=1, walkers=8, steps=2,
            pretrain_steps=0, burn_in_steps=0, mcmc_moves=1, checkpoint_every=1,
        )  # fmt: skip
        psijax.train(**{**settings, **changes}, out=str(root / "run"), progress=False)
        _REAL_CACHE[key] = root / "run"
    return _REAL_CACHE[key]


def real_run(checkpoints_of: dict | None = None, damage: str | None = None):
    """Setup: copy a genuine run to `tmp/REAL`; then give it the checkpoints of a run with
    `checkpoints_of` changed, or damage its files."""

    def setup(tmp: Path) -> None:
        run = tmp / REAL
        shutil.copytree(_genuine_run(), run)
        if checkpoints_of:
            shutil.rmtree(run / "checkpoints")
            shutil.copytree(_genuine_run(**checkpoints_of) / "checkpoints", run / "checkpoints")
        newest = max((run / "checkpoints").iterdir(), key=lambda p: int(p.name))
        data = sorted((newest / "state").rglob("d/*"), key=lambda p: -p.stat().st_size)[0]
        if damage == "flip":  # a bit in every eighth of every file: the arrays are compressed,
            # and a single flip (or one per file) can land where no read reaches it
            for part in (newest / "state").rglob("d/*"):
                raw = bytearray(part.read_bytes())
                for i in range(len(raw) // 8, len(raw), max(len(raw) // 8, 1)):
                    raw[i] ^= 0x10
                part.write_bytes(bytes(raw))
        elif damage == "truncate":
            data.write_bytes(data.read_bytes()[:100])
        elif damage == "meta":
            (newest / "meta" / "metadata").write_text("{not json")
        elif damage == "config":
            (run / "config.json").write_text("{not json")

    return setup


CASES = [
    # ---------------------------------------------------------------- molecule: atom strings
    Case("unknown-element", flags("--system", "Xx 0 0 0"), "unknown element 'Xx'",
         "use a chemical symbol"),
    Case("atom-missing-coordinate", flags("--system", "H 0 0"), "has 3 fields",
         "write 'Symbol x y z'"),
    Case("non-numeric-coordinate", flags("--system", "H 0 0 abc; H 0 0 1.4"),
         "coordinate 'abc'", "write x y z as numbers"),
    Case("nan-coordinate", flags("--system", "H 0 0 nan; H 0 0 1.4"), "coordinate 'nan'",
         "give a real position"),
    Case("inf-coordinate", flags("--system", "H 0 0 0; H 0 0 -inf"), "coordinate '-inf'",
         "give a real position"),
    Case("coincident-nuclei", flags("--system", "H 0 0 0; H 0 0 0"),
         "atoms 1 (H) and 2 (H) are 0 bohr apart", "move or remove one"),
    Case("empty-system", flags("--system", " "), "no atoms", "give at least one"),
    Case("unknown-unit", flags("--system", "H 0 0 0; H 0 0 0.74", "--unit", "furlong"),
         "unknown unit 'furlong'", "use 'bohr' or 'angstrom'"),
    # --------------------------------------------------------------- molecule: charge, spin
    Case("charge-leaves-no-electrons", flags("--system", "H", "--charge", "1"),
         "leaves 0 electrons", "use a charge of at most 0"),
    Case("spin-wrong-parity", flags("--system", "Li", "--spin", "0"),
         "spin 0 is impossible with 3 electrons", "use e.g. spin=1"),
    Case("spin-too-large", flags("--system", "H2", "--spin", "4"),
         "spin 4 needs more than the 2 electrons", "use -2 <= spin <= 2"),
    # ------------------------------------------------------------ effective core potentials
    Case("ecp-unknown-table", flags("--system", "Cl 0 0 0", "--ecp", "nosuchecp"),
         "unknown ECP 'nosuchecp'", "use a name pyscf knows"),
    Case("ecp-element-not-in-table", flags("--system", "H 0 0 0; Cl 0 0 2.4", "--ecp", "H:lanl2dz"),
         "has no potential for H", "leave it all-electron"),
    Case("ecp-removes-nothing", flags("--system", "H2", "--ecp", "lanl2dz"),
         "removes no core electrons", "run all-electron"),
    Case("ecp-element-not-in-molecule", flags("--system", "Cl 0 0 0", "--ecp", "Na:ccecp"),
         "names Na, which is not in the molecule", "name only its elements"),
    Case("ecp-all-electron-basis", flags("--system", "Cl 0 0 0", "--ecp", "ccecp",
                                         "--basis", "cc-pvdz", "--pretrain-steps", "1"),
         "basis 'cc-pvdz' is an all-electron basis", "use a basis made for that ECP"),
    Case("ecp-valence-spin-parity", flags("--system", "Cl 0 0 0", "--ecp", "ccecp", "--spin", "0"),
         "spin 0 is impossible with 7 electrons", "use e.g. spin=1"),
    Case("ecp-quadrature-unknown", flags("--ecp-quadrature", "7"),
         "ecp_quadrature=7 has no rule", "use one of 4, 6, 12, 18, 26"),
    Case("ecp-neighbours-negative", flags("--ecp-neighbours", "-3"),
         "ecp_neighbours=-3 must be >= 0", "(0: all) or unset it"),
    Case("ecp-soft-core-negative", flags("--ecp-soft-core", "-0.1"),
         "ecp_soft_core=-0.1 must be >= 0", "in bohr (0: none)"),
    # ------------------------------------------------------------ molecule: presets, .xyz
    Case("unknown-preset", flags("--system", "Unobtainium"), "'Unobtainium' is neither a preset",
         "use one of those"),
    Case("missing-xyz", path_flag("--system", "missing.xyz"), "missing.xyz' does not exist",
         "give the path of an .xyz file"),
    Case("empty-xyz", path_flag("--system", "empty.xyz"), "empty.xyz' is empty",
         "write the atom count", setup=write("empty.xyz", "")),
    Case("truncated-xyz", path_flag("--system", "short.xyz"),
         "declares 3 atoms but has 2 atom lines", "make the count on line 1 match",
         setup=write("short.xyz", "3\nwater, cut short\nO 0 0 0\nH 0 0.757 0.587\n")),
    Case("xyz-non-numeric-count", path_flag("--system", "count.xyz"), "got 'three'",
         "put the atom count on the first line",
         setup=write("count.xyz", "three\n\nH 0 0 0\nH 0 0 0.74\nH 0 0 1.48\n")),
    Case("xyz-unknown-element", path_flag("--system", "qq.xyz"), "unknown element 'Qq' on line 3",
         "use a chemical symbol", setup=write("qq.xyz", "1\n\nQq 0 0 0\n")),
    Case("xyz-not-text", path_flag("--system", "binary.xyz"), "binary.xyz' is not UTF-8 text",
         "give a plain-text .xyz file", setup=write("binary.xyz", b"\xff\xfe\x00\x01\x80\x81")),
    # ------------------------------------------------------------------------- config file
    Case("config-missing", path_flag("--config", "nowhere.toml"), "nowhere.toml' does not exist",
         "check the path"),
    Case("config-unknown-key", path_flag("--config", "key.toml"), "unknown config key 'stepz'",
         "valid keys are", setup=write("key.toml", TINY_CONFIG + "stepz = 3\n")),
    Case("config-wrong-type", path_flag("--config", "type.toml"), "steps='many' has the wrong type",
         "give a whole number like", setup=write("type.toml", TINY_CONFIG + 'steps = "many"\n')),
    Case("config-invalid-toml", path_flag("--config", "syntax.toml"), "syntax.toml' is not valid",
         "fix its syntax", setup=write("syntax.toml", "steps = = 3\n")),
    Case("config-json-not-a-table", path_flag("--config", "list.json"), "must hold a table",
         "key = value pairs", setup=write("list.json", "[1, 2]\n")),
    Case("config-bad-layers", path_flag("--config", "layers.toml"), "layers=[[8]] is invalid",
         "give pairs of widths", setup=write("layers.toml", "layers = [[8]]\n")),
    # ----------------------------------------------------------------- numbers out of range
    Case("steps-zero", flags("--steps", "0"), "steps=0 must be positive", "give a value > 0"),
    Case("steps-one", flags("--steps", "1"), "steps=1: the energy's error bar needs at least 2",
         "give --steps 2 or more"),
    Case("walkers-zero", flags("--walkers", "0"), "walkers=0 must be positive",
         "give a value > 0"),
    Case("walkers-negative", flags("--walkers", "-5"), "walkers=-5 must be positive",
         "give a value > 0"),
    Case("walkers-not-divisible-by-devices", flags("--walkers", "6"),
         "walkers=6 cannot be split evenly over 4 devices", "use a positive multiple of 4"),
    Case("devices-too-many", flags("--devices", "5"), "devices=5 but 4 are available",
         "choose a number from 1 to 4 (a CPU's cores are one device: JAX_NUM_CPU_DEVICES=N"),
    Case("devices-zero", flags("--devices", "0"), "devices=0 but 4 are available",
         "choose a number from 1 to 4"),
    Case("pretrain-steps-negative", flags("--pretrain-steps", "-1"),
         "pretrain_steps=-1 must be >= 0", "give 0 to skip it"),
    Case("learning-rate-negative", flags("--learning-rate", "-0.1"),
         "learning_rate=-0.1 must be > 0", "give a positive value"),
    Case("determinants-zero", flags("--determinants", "0"), "determinants=0 must be positive",
         "give a value > 0"),
    Case("seed-too-large", flags("--seed", str(2**64)), f"seed={2**64} is out of range",
         "give a whole number from 0 to"),
    # ---------------------------------------------------------------------- named choices
    Case("unknown-optimizer", flags("--optimizer", "kfac"), "optimizer='kfac' is unknown",
         "use one of spring, march, adam"),
    Case("unknown-laplacian", flags("--laplacian", "magic"), "laplacian='magic' is unknown",
         "use one of default"),
    Case("config-key-in-another-section", lambda tmp: ["--config", "sec.toml"],
         "config key 'walkers' belongs in [sampler], not [run]", "move it there",
         setup=write("sec.toml", "[run]\nwalkers = 8\n")),
    Case("config-unknown-key-in-section", lambda tmp: ["--config", "sec.toml"],
         "unknown config key 'width' in [ansatz]", "valid keys there are",
         setup=write("sec.toml", "[ansatz]\nwidth = 3\n")),
    Case("config-key-flat-and-in-section", lambda tmp: ["--config", "sec.toml"],
         "config key 'walkers' is given twice", "keep one",
         setup=write("sec.toml", "walkers = 8\n[sampler]\nwalkers = 16\n")),
    Case("unknown-ansatz", flags("--ansatz", "schnet"), "ansatz='schnet' is unknown",
         "use one of ferminet, psiformer"),
    Case("flag-not-a-bool", flags("--layer-norm", "maybe"), "--layer-norm",
         "'maybe' is not true or false"),
    Case("config-not-a-bool", lambda tmp: ["--config", "bool.toml"],
         "full_det='no' has the wrong type", "give true or false",
         setup=write("bool.toml", TINY_CONFIG + 'full_det = "no"\n')),
    Case("zero-attention-heads", flags("--attention-heads", "0"),
         "attention_heads=0 must be positive", "give a value > 0"),
    Case("empty-basis", flags("--basis", " "), "basis is empty", "give a basis name"),
    Case("unknown-basis", flags("--basis", "nosuchbasis", "--pretrain-steps", "1"),
         "unknown basis 'nosuchbasis'", "use a basis pyscf knows"),
    Case("flag-not-a-number", flags("--steps", "many"), "--steps", "whole number"),
    # ---------------------------------------------------------------------- run directory
    Case("out-holds-another-run", path_flag("--out", PREVIOUS), "already holds a run",
         "pass --force"),
    Case("out-inside-a-file", path_flag("--out", "a-file/run"), "cannot write the training run",
         "choose another --out", setup=lambda tmp: (tmp / "a-file").write_text("data\n")),
    Case("checkpoint-every-negative", flags("--checkpoint-every", "-1"),
         "checkpoint_every=-1 must be >= 0", "give 0"),
    Case("keep-checkpoints-zero", flags("--keep-checkpoints", "0"),
         "keep_checkpoints=0 must be positive", "give a value > 0"),
    # --------------------------------------------------------------------- resume, checkpoints
    Case("resume-no-run", path_flag("--resume", "nothing-here"), "holds no psijax run",
         "start a new run with --out", setup=lambda tmp: (tmp / "nothing-here").mkdir()),
    Case("resume-and-force", lambda tmp: ["--resume", str(tmp / REAL), "--force"],
         "--resume and --force contradict", "give only one", setup=real_run()),
    Case("resume-changes-the-network", lambda tmp: ["--resume", str(tmp / REAL),
         "--determinants", "3"], "determinants cannot change when resuming",
         "start a new run in another --out", setup=real_run()),
    Case("resume-changes-the-ansatz", lambda tmp: ["--resume", str(tmp / REAL),
         "--ansatz", "psiformer"], "ansatz cannot change when resuming",
         "start a new run in another --out", setup=real_run()),
    Case("resume-changes-the-molecule", lambda tmp: ["--resume", str(tmp / REAL),
         "--system", "LiH"], "system cannot change when resuming", "drop that setting",
         setup=real_run()),
    Case("checkpoint-from-another-molecule", lambda tmp: ["--resume", str(tmp / REAL)],
         "belongs to a run with another molecule", "resume it with its own config",
         setup=real_run(checkpoints_of={"system": "H 0 0 0; H 0 0 1.5"})),
    Case("checkpoint-from-another-network", lambda tmp: ["--resume", str(tmp / REAL)],
         "belongs to a run with another layers", "start a new run in another --out",
         setup=real_run(checkpoints_of={"layers": ((8, 4), (8, 4))})),
    Case("checkpoint-bit-flipped", lambda tmp: ["--resume", str(tmp / REAL)],
         "is damaged", "delete that step directory", setup=real_run(damage="flip")),
    Case("checkpoint-truncated", lambda tmp: ["--resume", str(tmp / REAL)],
         "is damaged", "delete that step directory", setup=real_run(damage="truncate")),
    Case("checkpoint-meta-garbage", lambda tmp: ["--resume", str(tmp / REAL)],
         "is damaged", "delete that step directory", setup=real_run(damage="meta")),
    Case("resume-config-json-garbage", lambda tmp: ["--resume", str(tmp / REAL)],
         "is not valid", "fix its syntax", setup=real_run(damage="config")),
    # ---------------------------------------------------------- flags generated from the config
    Case("layers-flag-malformed", flags("--layers", "64x"),
         "'64x' is not a list of layer widths", "give e.g. 64x16,64x16"),
    Case("layers-flag-zero-width", flags("--layers", "0x4"), "layers=((0, 4),) is invalid",
         "give (one-electron, two-electron) widths"),
    Case("clip-scale-not-a-number", flags("--clip-scale", "wide"), "--clip-scale",
         "'wide' is not a number"),
    Case("clip-scale-zero", flags("--clip-scale", "0"), "clip_scale=0.0 must be positive",
         "give a value > 0"),
    Case("chunk-size-zero", flags("--chunk-size", "0"), "chunk_size=0 must be",
         "a positive number or unset"),
    Case("eval-fraction-too-large", flags("--eval-fraction", "1.5"),
         "eval_fraction=1.5 must be in (0, 1]", "give e.g. 0.3"),
    Case("decay-steps-zero", flags("--decay-steps", "0"), "decay_steps=0.0 must be positive",
         "give a value > 0"),
    Case("dry-run-unknown-basis", flags("--dry-run", "--basis", "nosuchbasis"),
         "unknown basis 'nosuchbasis'", "use a basis pyscf knows"),
    Case("dry-run-out-holds-another-run", flags("--dry-run", "--out", PREVIOUS),
         "already holds a run", "pass --force"),
    # ---------------------------------------------------------------------- multi-process
    Case("coordinator-unreachable", lambda tmp: ["--coordinator", f"127.0.0.1:{free_port()}",
         "--num-processes", "2", "--process-id", "1", "--coordinator-timeout", "1"],
         "cannot reach the coordinator", "start process 0 first"),
    Case("coordinator-not-host-port", flags("--coordinator", "node17", "--num-processes", "2",
         "--process-id", "0"), "coordinator 'node17' is not host:port", "give e.g."),
    Case("process-id-out-of-range", flags("--coordinator", "127.0.0.1:1234",
         "--num-processes", "2", "--process-id", "2"), "process_id=2 must be between 0",
         "num_processes - 1"),
    Case("distributed-flags-incomplete", flags("--coordinator", "127.0.0.1:1234"),
         "needs --coordinator, --num-processes and --process-id", "give all three"),
]  # fmt: skip


def _previous_run(tmp: Path) -> None:
    run = tmp / PREVIOUS
    run.mkdir()
    (run / "metrics.csv").write_text("step,energy\n0,-1.1\n1,-1.15\n")
    (run / "summary.json").write_text('{"system": "H2", "energy": -1.15}\n')
    (run / "config.json").write_text('{"system": "H2", "steps": 2}\n')
    (run / "energy.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))


def _snapshot(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every path under root: (bytes, mtime_ns) for a file, None for a directory."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        if p.is_file()
        else None
        for p in sorted(root.rglob("*"))
    }


def _set_old_mtimes(root: Path) -> None:
    """So that a rewrite with the same bytes still shows, even on a coarse-clock filesystem."""
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, ns=(PAST_NS, PAST_NS))


def _main(argv: list[str]) -> tuple[int | str | None, str, list[str]]:
    """Exit code of cli.main, what a console would show of an uncaught exception, and the
    files the call left open (a ResourceWarning when they are collected)."""
    uncaught = ""
    stray: list = []
    hook, sys.unraisablehook = sys.unraisablehook, stray.append
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            try:
                code = main(argv)
            except SystemExit as exit_:  # argparse exits instead of returning
                code = exit_.code
            except Exception:
                code, uncaught = None, traceback.format_exc()
            if "--resume" in argv:
                time.sleep(0.5)  # let orbax's reader threads finish (see below)
            gc.collect()
    finally:
        sys.unraisablehook = hook
    # After a failed read of a damaged checkpoint orbax leaves benign noise; nothing else
    # may be left behind.
    unexpected = [u for u in stray if not orbax_read_noise(u)]
    assert not unexpected, [f"{u.exc_type.__name__}: {u.exc_value}" for u in unexpected]
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    return code, uncaught, leaked


def _params() -> list:
    return [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.xfail(strict=True, reason=case.xfail)] * bool(case.xfail),
        )
        for case in CASES
    ]


def test_case_ids_are_unique():
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", _params())
def test_bad_input_is_one_line_exit_2_and_nothing_changes(
    case: Case, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # a stray relative path lands here, not in the repository
    _previous_run(tmp_path)
    (tmp_path / "tiny.toml").write_text(TINY_CONFIG)
    if case.setup is not None:
        case.setup(tmp_path)
    _set_old_mtimes(tmp_path)
    before = _snapshot(tmp_path)
    argv = ["train", "--config", "tiny.toml", *TINY, "--out", NEW_OUT, *case.args(tmp_path)]

    code, uncaught, leaked = _main(argv)

    out, err = capsys.readouterr()
    err += uncaught
    assert "Traceback" not in out + err, err
    assert code == 2, f"exit code {code!r}; stderr: {err}"
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith("psijax: error: ")
    assert case.problem in err, f"{case.problem!r} not in {err!r}"
    assert case.fix in err, f"{case.fix!r} not in {err!r}"
    assert not leaked, f"the failed run left files open: {leaked}"

    after = _snapshot(tmp_path)
    changed = [name for name, was in before.items() if after.get(name, "gone") != was]
    assert not changed, f"modified or deleted: {changed}"
    new = sorted(set(after) - set(before))
    assert not [name for name in new if name.startswith(f"{PREVIOUS}/")], new
    assert not new, f"the failed run left new files or directories: {new}"


def test_console_entry_bad_input_exits_2_without_traceback(tmp_path):
    """The real process: `python -m psijax.cli train ...` with an unknown element."""
    _previous_run(tmp_path)
    before = _snapshot(tmp_path)
    root = str(Path(psijax.__file__).resolve().parents[1])  # the psijax these tests import
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    argv = ["train", *TINY, "--system", "Xx 0 0 0", "--out", PREVIOUS]
    proc = subprocess.run(
        [sys.executable, "-m", "psijax.cli", *argv],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.startswith("psijax: error: unknown element 'Xx'")
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert _snapshot(tmp_path) == before
