"""Fake KFD topology trees (``sys/class/kfd/kfd/topology/nodes/N/properties``) as the kernel writes them.

The properties are those of a real host (a 32-core CPU node and RDNA GPU
nodes). ``rocm-bake index check`` points each index's installed checker
(``python -m rocm_torch``) at one for the index's own arch and one for another
arch; the tests build their hosts from it too.
"""

from __future__ import annotations

from pathlib import Path

from rocm_bake.gpu.kfd import KFD_NODES, target_version_of

CPU_PROPS = """cpu_cores_count 32
simd_count 0
mem_banks_count 1
caches_count 0
io_links_count 1
cpu_core_id_base 0
simd_id_base 0
max_waves_per_simd 0
lds_size_in_kb 0
gds_size_in_kb 0
num_gws 0
wave_front_size 0
array_count 0
simd_arrays_per_engine 0
cu_per_simd_array 0
simd_per_cu 0
max_slots_scratch_cu 0
gfx_target_version 0
vendor_id 0
device_id 0
location_id 0
domain 0
drm_render_minor 0
hive_id 0
num_sdma_engines 0
"""


def gpu_props(version: int, device_id: int = 0x7551) -> str:
    return f"""cpu_cores_count 0
simd_count 128
mem_banks_count 1
caches_count 206
io_links_count 1
cpu_core_id_base 0
simd_id_base 2147487744
max_waves_per_simd 16
lds_size_in_kb 64
gds_size_in_kb 0
num_gws 64
wave_front_size 32
array_count 8
simd_arrays_per_engine 2
cu_per_simd_array 8
simd_per_cu 2
max_slots_scratch_cu 32
gfx_target_version {version}
vendor_id 4098
device_id {device_id}
location_id 768
domain 0
drm_render_minor 128
hive_id 0
num_sdma_engines 2
"""


def sysfs(root: Path, versions: list[int]) -> Path:
    """A KFD topology: node N's properties carry versions[N] (0 = CPU node)."""
    nodes = root / KFD_NODES
    for index, version in enumerate(versions):
        node = nodes / str(index)
        node.mkdir(parents=True)
        node.joinpath("properties").write_text(CPU_PROPS if version == 0 else gpu_props(version))
        node.joinpath("name").write_text("" if version == 0 else "ip discovery\n")
    return root




def host(root: Path, gfx: list[str]) -> Path:
    """A host with one CPU node and one GPU node per name in ``gfx`` (``gfx950``, ...), in that order."""
    return sysfs(root, [0] + [target_version_of(name) for name in gfx])
