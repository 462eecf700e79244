"""The one exception type the CLI prints as a single line and exits 2 on.

It is not only bad input: a refused operation (a wrong-arch wheel, an
unverifiable asset, a lock held too long) and a remote service rocm-bake gave
up on after its retries (``rocm_bake.retry``) raise it too. What they share is
what the user needs: one line naming what failed and why, no traceback. Bad
input changes nothing; a give-up may come after some work was already done.
"""


class RocmBakeError(Exception):
    """A failure the user can act on: bad input, a refused operation, or a give-up; the message names it."""
