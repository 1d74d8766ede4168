"""psijax's own exceptions. Each message is one line naming the problem and the fix."""

import signal


class PsijaxError(Exception):
    """Base class of every error psijax raises on purpose."""


class InputError(PsijaxError, ValueError):
    """Bad user input: a molecule, a config value, a file. The CLI exits with code 2."""


class UnsupportedError(PsijaxError, NotImplementedError):
    """A combination psijax refuses up front because it would crash or be wrong."""


class TrainingError(PsijaxError):
    """Training cannot go on (e.g. every update is rejected). The CLI exits with code 3."""


class Interrupted(PsijaxError):
    """SIGTERM or SIGINT arrived; a checkpoint at ``step`` was written (if ``saved``), and
    ``resume`` (a command) continues the run."""

    def __init__(self, signum: int, step: int, saved: bool, resume: str = ""):
        self.signum, self.step, self.saved, self.resume = signum, step, saved, resume
        name = signal.Signals(signum).name
        what = (
            f"checkpoint written at step {step}"
            if saved
            else "no checkpoint written (none configured, or the newest steps were rejected)"
        )
        super().__init__(f"{name} received: {what}")
