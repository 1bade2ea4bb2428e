"""The one exception type the CLI turns into a one-line error."""


class ZdinitError(Exception):
    """A failure the user can act on; str() is the whole message."""

    def __init__(self, message, exit_code=1):
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(ZdinitError):
    """Bad options or input: exit status 2, like argparse."""

    def __init__(self, message):
        super().__init__(message, exit_code=2)
