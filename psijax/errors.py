"""psijax's own exceptions. Each message is one line naming the problem and the fix."""


class PsijaxError(Exception):
    """Base class of every error psijax raises on purpose."""


class InputError(PsijaxError, ValueError):
    """Bad user input: a molecule, a config value, a file. The CLI exits with code 2."""


class UnsupportedError(PsijaxError, NotImplementedError):
    """A combination psijax refuses up front because it would crash or be wrong."""
