"""Pulumi ComponentResources and dynamic providers: they declare resources and carry out the engine's calls.

Every decision (what to build, what an index holds, what to publish) comes
from ``rocm_bake`` (Pulumi-free and tested for real); the providers here call
it and report. What they look up themselves is run-time context the engine
cannot hand them safely: the GitHub token, which ``components.publish`` reads
at apply time (``pulumi config get`` for the stack's current secret) so that
it never enters state.
"""
