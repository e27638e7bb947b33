"""The exceptions of attnbatch: one class per meaning of the command line's exit codes."""


class AttnbatchError(Exception):
    """A failure of attnbatch: ``exit_code`` is the command line's exit code for it, ``message``
    its one-line message (what was wrong, what was expected)."""

    exit_code = 1

    def __init__(self, message, exit_code=None):
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(AttnbatchError, ValueError):
    """Exit code 2: options (or arguments) that cannot work together, or a resource limit."""

    exit_code = 2


class InvalidInputError(AttnbatchError, ValueError):
    """Exit code 3: the input's content breaks the contract (shapes, dtypes, lengths, NaN)."""

    exit_code = 3


class FileError(AttnbatchError):
    """Exit code 4: a file that cannot be opened, read, written or renamed."""

    exit_code = 4


class Interrupted(AttnbatchError):
    """Exit code 5: a run stopped by a signal after a clean checkpoint; run again with
    ``resume=True`` to continue."""

    exit_code = 5


class InternalError(AttnbatchError):
    """Exit code 1: a bug of attnbatch."""

    exit_code = 1


_BY_CODE = {2: UsageError, 3: InvalidInputError, 4: FileError, 5: Interrupted}


def error_for(exit_code, message):
    """The exception for an exit code and its message (the compiled core raises these)."""
    return _BY_CODE.get(exit_code, InternalError)(message, exit_code)
