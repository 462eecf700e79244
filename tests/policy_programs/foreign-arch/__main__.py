"""Breaks own-arches-only: the gfx1201 stack declares gfx950's pip index (our WheelIndex)."""

from components.index_provider import IndexInputs, WheelIndex
from rocm_bake.archset import ArchSet

WheelIndex("index-gfx950", IndexInputs(arch=ArchSet("gfx950"), wheels_dir="dist/wheels/gfx950", dist="dist"))
