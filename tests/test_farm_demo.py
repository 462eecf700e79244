"""``make farm-demo`` (rocm_bake/local/farm/demo.py) reads two things other modules write: the farm's export lines
and the closing table of ``rocm-bake arches``. Each is read here from what its writer really produces, so a
change of either format fails here rather than in a demo that prints no wall times.

The demo itself (a farm, both demo stacks built at once) takes minutes and is proven by hand, as the
docs say (docs/team-and-farm.md); the same path, on two buildkitds, runs in tests/test_arches_engine.py.
"""

from __future__ import annotations

from pathlib import Path

from rocm_bake.commands.arches import Outcome, Pass, table
from rocm_bake.local.farm.demo import Row, demo_arch, stack_seconds, table_rows
from rocm_bake.local.farm.farm import Farm, read_exports
from rocm_bake.local.farm.layout import DEMO_STACKS, Layout


def test_the_exports_read_back_as_the_farm_wrote_them(tmp_path: Path) -> None:
    exports = {"PULUMI_BACKEND_URL": "s3://rocm-bake-state?endpoint=http://198.18.7.30:7070&use_path_style=true",
               "DOCKER_CONFIG": str(tmp_path / "a dir with spaces"), "AWS_SECRET_ACCESS_KEY": "it's=secret"}
    env_file = tmp_path / "env"
    env_file.write_text("\n".join(Farm(Layout(tmp_path, 7), exports).export_lines()) + "\n")
    assert read_exports(env_file) == exports


def test_each_stacks_row_is_read_from_the_arches_table() -> None:
    done = Outcome(Pass("demo-gfx950", "gfx950", "farm-builder-1"), "ok", 31.04, 12)
    failed = Outcome(Pass("demo-gfx1201", "gfx1201", "farm-builder-2"), "failed (exit 1)", 7.5, None,
                     "error: 12.0 s  to push  198.18.7.20:5000")
    never = Outcome(Pass("demo-gfx1100", "gfx1100", "farm-builder-2"))
    output = "demo-gfx950  | Resources:\nSTACK  noise\n" + table([done, failed, never]) + "\n"
    assert stack_seconds(output) == {"demo-gfx950": 31.0, "demo-gfx1201": 7.5}
    assert table_rows(output) == {"demo-gfx950": Row("farm-builder-1", "ok", 31.0, 12),
                                  "demo-gfx1201": Row("farm-builder-2", "failed (exit 1)", 7.5, None)}


def test_the_demo_stacks_name_their_index() -> None:
    assert [demo_arch(stack) for stack in DEMO_STACKS] == ["gfx950", "gfx1201"]
