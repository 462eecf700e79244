"""Subcommands of ``rocm-bake``: one module each, with ``register(subparsers)``."""
