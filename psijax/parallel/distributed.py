"""Joining JAX's distributed runtime: one global mesh over the devices of all processes.

Call ``initialize`` before any other JAX work, in every process of the job. The coordinator
(process 0's ``host:port``), the number of processes and this process's id come from the
arguments, else from ``PSIJAX_COORDINATOR`` / ``PSIJAX_NUM_PROCESSES`` / ``PSIJAX_PROCESS_ID``,
else (``auto=True``) from JAX's own cluster detection (SLURM, Open MPI, ...).

JAX aborts the whole process (no exception) when the coordinator cannot be reached, so
this module checks first: process 0 must be able to listen on the port, the others retry a
TCP connection until ``timeout_s`` -- and a failure is a one-line ``InputError``.

``peer_timeout_s`` (else ``PSIJAX_PEER_TIMEOUT``, else 120 s) is how long a training step
may wait for the other processes before the run stops with exit code 75
(``psijax.parallel.peers``); JAX's heartbeat timeout is set from it so that psijax reports first.
"""

from __future__ import annotations

import os
import socket
import time

from psijax.errors import InputError
from psijax.parallel import peers

ENV = ("PSIJAX_COORDINATOR", "PSIJAX_NUM_PROCESSES", "PSIJAX_PROCESS_ID")


def initialize(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    auto: bool = False,
    timeout_s: float = 300.0,
    peer_timeout_s: float | None = None,
) -> None:
    """Join the job; a no-op for a single process without any setting."""
    import jax

    global _peer_timeout_s
    _peer_timeout_s = _peer_timeout(peer_timeout_s)
    heartbeat = peers.heartbeat_s(_peer_timeout_s)

    coordinator = coordinator or os.environ.get(ENV[0])
    num_processes = num_processes if num_processes is not None else _env_int(ENV[1])
    process_id = process_id if process_id is not None else _env_int(ENV[2])
    given = [x is not None for x in (coordinator, num_processes, process_id)]
    if not any(given) and auto and (slurm := _slurm()) is not None:
        coordinator, num_processes, process_id = slurm
        given = [True, True, True]
    elif not any(given):
        if auto:  # other clusters (Open MPI, ...): JAX's own detection, without a pre-check
            _call(
                lambda: jax.distributed.initialize(heartbeat_timeout_seconds=heartbeat),
                "cluster auto-detection",
                timeout_s,
            )
        return
    if not all(given):
        raise InputError(
            "a multi-process run needs --coordinator, --num-processes and --process-id "
            f"together (or {', '.join(ENV)}); give all three"
        )
    host, port = _address(coordinator)
    if num_processes < 1:
        raise InputError(f"num_processes={num_processes} must be >= 1")
    if not 0 <= process_id < num_processes:
        raise InputError(
            f"process_id={process_id} must be between 0 and num_processes - 1 = {num_processes - 1}"
        )
    if process_id == 0:
        _check_can_listen(host, port)
    else:
        _wait_for(host, port, timeout_s)
    _call(
        lambda: jax.distributed.initialize(
            coordinator,
            num_processes,
            process_id,
            initialization_timeout=int(timeout_s),
            heartbeat_timeout_seconds=heartbeat,
        ),
        coordinator,
        timeout_s,
    )


def peer_timeout() -> float:
    """Seconds a step may wait for the other processes (as set by ``initialize``)."""
    return _peer_timeout_s if _peer_timeout_s is not None else _peer_timeout(None)


_peer_timeout_s: float | None = None


def _peer_timeout(value: float | None) -> float:
    if value is None:
        text = os.environ.get(peers.ENV, "")
        try:
            value = float(text) if text else peers.DEFAULT_TIMEOUT_S
        except ValueError:
            raise InputError(f"{peers.ENV}={text!r} is not a number; give seconds") from None
    if not value > 0:
        raise InputError(
            f"peer timeout {value:g} s must be > 0; give several times the longest step, "
            f"e.g. {peers.DEFAULT_TIMEOUT_S:g}"
        )
    return float(value)


def _slurm() -> tuple[str, int, int] | None:
    """(coordinator, processes, this process) of a SLURM job step, as JAX would pick them:
    the step's first node, a port derived from the job id."""
    env = os.environ
    needed = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID")
    if not all(name in env for name in needed):
        return None
    nodes = env["SLURM_STEP_NODELIST"]
    cut = min([i for i, ch in enumerate(nodes) if ch in ",["] or [len(nodes)])
    first = nodes[:cut]
    if cut < len(nodes) and nodes[cut] == "[":  # node[001-004,007] -> node001
        rest = nodes[cut + 1 :]
        first += rest[: min([i for i, ch in enumerate(rest) if ch in ",-]"] or [len(rest)])]
    port = int(env["SLURM_JOB_ID"]) % 4096 + 65536 - 4096
    return f"{first}:{port}", int(env["SLURM_NTASKS"]), int(env["SLURM_PROCID"])


def _call(fn, where: str, timeout_s: float) -> None:
    try:
        fn()
    except (RuntimeError, ValueError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        raise InputError(
            f"could not join the distributed job at {where} ({first}); check the coordinator "
            "address and that every process of the job was started"
        ) from None


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise InputError(f"{name}={value!r} is not an integer; set it to a number") from None


def _address(coordinator: str) -> tuple[str, int]:
    host, sep, port = coordinator.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(
            f"coordinator {coordinator!r} is not host:port; give e.g. 10.0.0.1:12345 "
            "(process 0's address and a free port)"
        )
    return host.strip("[]"), int(port)


def _check_can_listen(host: str, port: int) -> None:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as err:
        raise InputError(
            f"coordinator host {host!r} cannot be resolved ({err.strerror}); give process 0's "
            "host name or IP address"
        ) from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as err:
            raise InputError(
                f"process 0 cannot listen on {host}:{port} ({err.strerror}); run process 0 on "
                "that host or pick a free port"
            ) from None


def _wait_for(host: str, port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=2.0):
                return
        except OSError as err:
            if time.monotonic() >= deadline:
                raise InputError(
                    f"cannot reach the coordinator at {host}:{port} after {timeout_s:g} s "
                    f"({err.strerror or err}); start process 0 first, check the address, or "
                    "raise --coordinator-timeout"
                ) from None
            time.sleep(0.5)
