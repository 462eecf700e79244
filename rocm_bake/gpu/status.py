"""Exit statuses of ``rocm-bake gpu-test`` beyond pass/fail/bad input.

Their own module, importing nothing, so the command's ``--help`` epilog
(which lists them) costs no ssh, pydantic or registry import.
"""

from __future__ import annotations

#: Exit status for an arch no fleet node can test (distinct from pass/fail/bad input).
NOT_COVERED_STATUS = 3
#: Exit status when the node stayed busy past ``--lock-timeout`` (the test never ran).
LOCK_TIMEOUT_STATUS = 4
#: ssh's own status for connection, authentication and host-key failures.
SSH_FAILURE_STATUS = 255
