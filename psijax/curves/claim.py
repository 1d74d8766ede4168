"""The output directory of a scan, a relaxation or a twist average: new, or holding the
same job (which then continues), never another one's files; its tables written whole."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from psijax import config as config_lib
from psijax.errors import InputError
from psijax.rundir.train_files import atomic_write


def claim(out: Path, manifest_name: str, manifest: dict, force: bool, noun: str) -> None:
    """``out`` for the job ``manifest`` (written to ``out/manifest_name``): new, or holding
    the same ``noun`` ("scan", "relaxation"), which continues; ``force`` clears it."""
    path = out / manifest_name
    if out.exists() and not out.is_dir():
        raise InputError(f"{str(out)!r} is a file; give a directory as --out")
    if out.exists() and any(out.iterdir()):
        if force:
            shutil.rmtree(out)
        elif not path.is_file():
            raise InputError(
                f"{str(out)!r} exists and holds no {noun}; give another --out, or --force to "
                "replace it"
            )
        elif _normal(json.loads(path.read_text())) != _normal(json.loads(json.dumps(manifest))):
            raise InputError(
                f"{str(out)!r} holds a {noun} of other points or settings; give another "
                "--out, or --force to replace it"
            )
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(manifest, indent=2))


def _normal(manifest: dict) -> dict:
    """``manifest`` with its config as the current ``Config`` reads it (keys added to the
    config since the job started take their defaults), so that a job started by an
    earlier psijax continues."""
    if isinstance(manifest.get("config"), dict):
        try:
            config = config_lib.from_dict(manifest["config"])
        except InputError:
            return manifest
        manifest = manifest | {"config": json.loads(json.dumps(config_lib.to_dict(config)))}
    return manifest


def write_rows(path: Path, rows: list[dict]) -> None:
    """``rows`` (one dict a row, the first's keys the header) as the CSV file ``path``,
    written whole beside it and moved over it, so that a reader never sees half a table."""
    part = path.with_name(path.name + ".tmp")
    with open(part, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    part.replace(path)
