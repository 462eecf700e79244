"""rocm-bake core: everything that does real work, with no Pulumi import (``plan_runtime`` aside: ``plan`` only).

Pulumi components under ``components/`` declare resources and delegate every
computation here, so the logic is testable for real without the Pulumi CLI.
The core never imports ``components``: the program imports the core.
"""

__version__ = "0.1.0"
