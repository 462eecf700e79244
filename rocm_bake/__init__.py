"""rocm-bake core: everything that does real work, with no Pulumi import.

Pulumi components under ``components/`` declare resources and delegate every
computation here, so the logic is testable for real without the Pulumi CLI.
"""

__version__ = "0.1.0"
