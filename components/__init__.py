"""Pulumi ComponentResources and dynamic providers: they declare, never compute.

Every decision comes from ``rocm_bake`` (Pulumi-free and tested for real).
"""
