"""rocm-bake Pulumi program: one stack per GPU architecture (stacks/Pulumi.<arch>.yaml)."""

from components.stack import define_stack, read_config

define_stack(read_config())
