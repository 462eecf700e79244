"""A farm's slot, claimed machine-wide: its names and its /24 are no other checkout's.

Claims live in ``$XDG_CACHE_HOME/rocm-bake/farms/<slot>`` (the checkout's path),
as registry ports do (:func:`rocm_bake.checkout.claim_in`). A slot is taken
only when its subnet is on no interface or route of this namespace and none
of its names (bridge, veths, namespaces) exists: a farm never adopts what
someone else made.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from rocm_bake.checkout import claim_in, claim_owner
from rocm_bake.errors import RocmBakeError
from rocm_bake.local.farm import net
from rocm_bake.local.farm.layout import HOSTS, SLOTS, Layout, slot_record


def claims_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "rocm-bake" / "farms"


def recorded_slot(root: Path) -> int | None:
    try:
        text = slot_record(root).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) in SLOTS else None


def held_slot(root: Path) -> int | None:
    """The slot ``root``'s farm holds: its record, else a claim naming ``root`` (its files were removed under it)."""
    slot = recorded_slot(root)
    if slot is not None:
        return slot
    for claim in sorted(claims_dir().glob("[0-9]*")) if claims_dir().is_dir() else []:
        if claim.name.isdigit() and int(claim.name) in SLOTS and claim_owner(claim) == root:
            return int(claim.name)
    return None


def claim_is_live(claim: Path, slot: int) -> bool:
    """Held while its checkout records that slot, or for a minute after it was made (being written now)."""
    try:
        if time.time() - claim.stat().st_mtime < 60:
            return True
    except OSError:
        return False
    owner = claim_owner(claim)
    return owner is not None and recorded_slot(owner) == slot


def free_of_others(layout: Layout) -> bool:
    """No interface, namespace or route of this host already uses the slot's names or subnet."""
    names = [layout.bridge, *(layout.veth(h) for h in HOSTS)]
    if any(net.link_exists(name) for name in names):
        return False
    if any(net.netns_exists(layout.netns(h)) for h in HOSTS):
        return False
    return layout.slot not in net.slots_in_use()


def claim_slot(root: Path) -> Layout:
    """A free slot for checkout ``root``, claimed and recorded in ``.rocm-bake/farm/slot``."""
    candidates = list(SLOTS)
    random.shuffle(candidates)
    for slot in candidates:
        layout = Layout(root, slot)
        if free_of_others(layout) and claim_in(claims_dir(), str(slot), root, lambda p, s=slot: claim_is_live(p, s)):
            layout.dir.mkdir(parents=True, exist_ok=True)
            slot_record(root).write_text(f"{slot}\n", encoding="utf-8")
            return layout
    raise RocmBakeError(f"no free farm slot in 198.18.{SLOTS.start}-{SLOTS.stop - 1}.0/24 "
                        f"(claims in {claims_dir()})")


def release_slot(layout: Layout) -> None:
    """Drop the claim, only if it names this checkout."""
    claim = claims_dir() / str(layout.slot)
    if claim_owner(claim) == layout.root:
        claim.unlink(missing_ok=True)
    slot_record(layout.root).unlink(missing_ok=True)
