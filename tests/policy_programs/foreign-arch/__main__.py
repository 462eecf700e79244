"""Breaks own-arches-only: the gfx1201 stack declares gfx950's pip index (our WheelIndex)."""

from components.index_provider import WheelIndex

WheelIndex("index-gfx950", "gfx950", "dist/wheels/gfx950", "dist")
