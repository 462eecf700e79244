"""A path that is not what a command wants is named for what it is: a FIFO, a directory, a file, or missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.index.rules import list_wheels
from rocm_bake.offload.wheel import wheel_targets


def test_wheel_arches_names_a_fifo_a_directory_and_a_missing_path(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.whl"
    os.mkfifo(fifo)
    with pytest.raises(RocmBakeError, match=rf"^{fifo}: is a FIFO \(named pipe\), not a wheel file$"):
        wheel_targets(fifo)
    with pytest.raises(RocmBakeError, match=rf"^{tmp_path}: is a directory, not a wheel file$"):
        wheel_targets(tmp_path)
    with pytest.raises(RocmBakeError, match=rf"^{tmp_path / 'gone.whl'}: wheel not found$"):
        wheel_targets(tmp_path / "gone.whl")


def test_index_build_names_a_file_given_as_the_wheels_directory(tmp_path: Path) -> None:
    wheel = tmp_path / "torch-2.9.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    with pytest.raises(RocmBakeError, match=rf"wheels directory {wheel} \(index gfx950\) is a regular file, not a "
                                            r"directory \(--wheels names the directory that holds the wheels\)"):
        list_wheels(wheel, ArchSet("gfx950"))
    with pytest.raises(RocmBakeError, match=rf"wheels directory {tmp_path / 'none'} \(index gfx950\) does not exist"):
        list_wheels(tmp_path / "none", ArchSet("gfx950"))
