"""One exception type for bad input, so the CLI can print it and exit 2."""


class RocmBakeError(Exception):
    """Bad input or a refused operation; the message names what and why."""
