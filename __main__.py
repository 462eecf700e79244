"""rocm-bake Pulumi program: one stack per GPU architecture (stacks/Pulumi.<arch>.yaml).

Bad config or a refused declaration ends the program as ``pulumi.RunError``:
the engine prints its one line (which key, which rule) and no traceback.
``rocm-bake plan`` takes ``define_stack`` from here without running the rest
(the language host runs this file as ``__main__``).
"""

import pulumi

from components.stack import check_run_environment, define_stack, read_config
from rocm_bake.errors import RocmBakeError


def run() -> None:
    try:
        config = read_config()
        check_run_environment(config)
        exports = define_stack(config)
    except RocmBakeError as exc:
        raise pulumi.RunError(" ".join(str(exc).split())) from None
    for key, value in exports.items():
        pulumi.export(key, value)


if __name__ == "__main__":
    run()
