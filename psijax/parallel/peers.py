"""A process of a multi-process run is lost: what it looks like and how it is reported.

Once a process of a ``jax.distributed`` job dies or stops answering, the others cannot go
on (JAX's runtime cannot be re-joined): their collectives either fail (a dead peer closes
its connections) or wait forever (a stopped or unreachable peer), and a little later JAX's
coordination service ends every process with a C++ stack dump and exit code 134.
psijax's step watch (``psijax.run.watch.StepWatch``) gets there first, on every surviving
process, and ends it with one line (``lost_line``)::

    psijax: error: lost process 1 of 2 (Gloo AllGather failed: Connection closed by peer
    [127.0.0.1]:40410) after step 37; the newest intact checkpoint is step 30; continue
    with: psijax train --resume RUN

(on one line) and exit code ``EXIT_CODE`` (75, ``EX_TEMPFAIL``: try again), so that a
scheduler can requeue the job and resume it. Two triggers: a collective fails with a
communication error (``is_communication_error``), or no step completes within the
watch's bound (which grows with the measured step time from the ``--peer-timeout`` floor
up to ``max_bound_s``).

JAX's own abort comes at the earliest ``heartbeat_s(timeout_s) / 2`` seconds after a
process stops (its heartbeats go out every half heartbeat timeout), which
``psijax.parallel.distributed.initialize`` makes ``max_bound_s + 30`` s: the watch always
speaks first. The checkpoints on disk are safe whatever the moment: orbax renames a
checkpoint into place only after every process has written its part.
"""

from __future__ import annotations

import re

EXIT_CODE = 75  # sysexits.h EX_TEMPFAIL: a temporary failure, the job may be retried
DEFAULT_TIMEOUT_S = 120.0
# The watch's bound for a multi-process run stops growing with the step time at the larger
# of these (JAX's heartbeat timeout is set from it): 5 floors, or 10 minutes.
MAX_BOUND_FLOORS = 5.0
MAX_BOUND_S = 600.0
ENV = "PSIJAX_PEER_TIMEOUT"

# Words of the errors a collective raises when its peer is gone (gloo, NCCL, MPI, gRPC).
_COMMUNICATION = re.compile(
    r"connection|peer|socket|gloo|nccl|mpi|collective|heartbeat|barrier|"
    r"unavailable|deadline_exceeded|aborted|broken pipe",
    re.IGNORECASE,
)


def max_bound_s(timeout_s: float) -> float:
    """The longest the watch waits for a step of a multi-process run whose floor is
    ``timeout_s``: the bound grows with the measured step time up to here."""
    return max(MAX_BOUND_FLOORS * timeout_s, MAX_BOUND_S)


def heartbeat_s(timeout_s: float) -> int:
    """JAX's heartbeat timeout for a watch of floor ``timeout_s``: JAX may abort as early as
    half of it after a process stops, 30 s after the watch's longest bound."""
    return int(2 * max_bound_s(timeout_s) + 60)


def is_communication_error(err: BaseException) -> bool:
    """Whether ``err`` (a ``jax.errors.JaxRuntimeError``) says a peer is unreachable, as
    opposed to a failure of this process (out of memory, a bad program)."""
    return bool(_COMMUNICATION.search(str(err)))


# An XLA status as an exception's message: how a runtime error reads when JAX hands it on
# as a plain ValueError (multihost_utils.process_allgather inside an orbax save does).
_XLA_STATUS = re.compile(
    r"^(UNKNOWN|UNAVAILABLE|INTERNAL|DEADLINE_EXCEEDED|ABORTED|CANCELLED|FAILED_PRECONDITION): "
)


def runtime_error_in(err: BaseException | None) -> BaseException | None:
    """The JAX runtime error that is ``err`` or caused it (orbax, e.g., wraps one in its
    own ``TimeoutError``), if any; a ValueError that carries an XLA status counts."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if type(err).__name__ in ("JaxRuntimeError", "XlaRuntimeError"):
            return err
        if isinstance(err, ValueError) and _XLA_STATUS.match(str(err)):
            return err
        err = err.__cause__ or err.__context__
    return None


def lost_line(
    cause: str,
    done: int | str,
    newest: int | None,
    resume: str,
    me: int,
    processes: int,
    process: int | None = None,
) -> str:
    """The one line that reports a lost process (``process`` if known) to process ``me``;
    ``done`` is the last completed step, or what was under way in words ("after
    pretraining step 25", "during burn-in")."""
    when = f"after step {done}" if isinstance(done, int) else done
    if process is None and processes == 2:
        process = 1 - me
    who = (
        f"process {process} of {processes}"
        if process is not None and process != me
        else f"another process of the {processes}"
    )
    return (
        f"psijax: error: lost {who} ({cause}) {when}; {saved_clause(newest)}; "
        f"continue with: {resume}"
    )


def saved_clause(newest: int | None) -> str:
    """What a run that ends now leaves to resume from: its newest intact checkpoint."""
    if newest is None:
        return "no checkpoint was written yet (the resume starts from the beginning)"
    return f"the newest intact checkpoint is step {newest}"


def cause_of(err: BaseException) -> str:
    """The first line of a communication error, without source locations, kept short."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    first = re.sub(r"\[[^\]\s]*\.(?:cc|h|cpp):\d+\]\s*", "", first)
    first = re.sub(r"^[A-Z_]+:\s*", "", first)  # the status code (UNKNOWN: ...)
    return first[:140]
