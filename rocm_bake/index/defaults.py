"""Constants the CLI needs to *declare* its options, importable for free.

``rocm-bake`` registers every subcommand at start-up, so anything the
argument parser needs (defaults, choices) must not pull in pydantic or
packaging: these live here, and the heavy modules re-export them.
"""

from __future__ import annotations

#: The ROCm release this project builds against (``+rocm10.1.0`` in the wheels' versions).
DEFAULT_ROCM_VERSION = "10.1.0"
#: Where ordinary dependencies such as numpy come from.
PYPI = "https://pypi.org/simple"
#: Names the public index the hash lock resolves PyPI dependencies against (default PYPI): a loopback stand-in
#: in the tests, a team's mirror elsewhere.
PUBLIC_INDEX_ENV = "ROCM_BAKE_PUBLIC_INDEX"
#: The installers ``index check`` proves the index with.
INSTALLERS = ("pip", "uv")
#: Root pages carry this, so a directory is recognisably an index rocm-bake wrote.
GENERATOR = "rocm-bake"
GENERATOR_TAG = f'<meta name="generator" content="{GENERATOR}">'
#: Wheels and their ``.metadata`` files sit here, beside the project pages.
FILES_DIR = "files"
