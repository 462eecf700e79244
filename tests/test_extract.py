"""Fetching wheels out of images pushed to a real local docker-registry."""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocm_bake.archset import ArchSet
from rocm_bake import progress
from rocm_bake.cli import main
from rocm_bake.errors import RocmBakeError
from rocm_bake.registry.extract import FETCH_MANIFEST, fetch_wheels, layer_may_hold_wheels, open_tar
from rocm_bake.registry.reader import VerifyingReader

from tests.readonly_fixtures import run_read_only
from tests.registry_fixtures import (  # noqa: F401 - fixtures
    Entry,
    Layer,
    Registry,
    push_image,
    push_index,
    registry,
    tar_bytes,
    wheel,
    zstd_cli,
)

TAG950 = "gfx950-rocm10.1.0"
TAG1201 = "gfx1201-rocm10.1.0"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def listing(out: Path) -> dict[str, str]:
    return {p.name: sha(p.read_bytes()) for p in sorted(out.iterdir()) if p.name != FETCH_MANIFEST}


def leftovers(dist: Path) -> list[str]:
    root = dist / "wheels"
    return sorted(p.name for p in root.iterdir() if p.name.startswith(".")) if root.exists() else []


def wheel_layer(files: dict[str, bytes], **kw: object) -> Layer:
    return Layer([Entry("wheels", kind="dir")] + [Entry(f"wheels/{n}", d) for n, d in files.items()], **kw)  # type: ignore[arg-type]


def test_layers_in_order_with_whiteouts_and_non_wheels_ignored(registry: Registry, tmp_path: Path) -> None:
    a, b, c, d = (wheel(x) for x in "abcd")
    base = Layer([
        Entry("wheels", kind="dir"), Entry(f"wheels/{a}", b"A1"), Entry(f"wheels/{b}", b"B1"),
        Entry("wheels/README.txt", b"not a wheel"), Entry("wheels/sub/nested-1.0-py3-none-any.whl", b"N"),
        Entry(f"opt/{c}", b"wheel outside the wheel dir"),
    ], created_by="RUN pip wheel -w /wheels . # buildkit")
    upper = Layer([
        Entry(f"wheels/.wh.{b}"), Entry(f"wheels/{c}", b"C2"), Entry(f"wheels/{a}", b"A2"),
        # a whiteout hides lower layers only, never a file in its own layer
        Entry(f"wheels/{d}", b"D2"), Entry(f"wheels/.wh.{d}"),
    ], created_by="RUN rm /wheels/b*.whl # buildkit")
    pushed = push_image(registry.address, "rocm-bake/torch", TAG950, [base, upper])
    result = fetch_wheels(ArchSet("gfx950"), [pushed.ref(registry.address)], tmp_path)
    out = tmp_path / "wheels" / "gfx950"
    assert listing(out) == {a: sha(b"A2"), c: sha(b"C2"), d: sha(b"D2")}
    assert result.images[0].members_ignored == 3  # README, the nested wheel, the /opt wheel
    record = json.loads((out / FETCH_MANIFEST).read_text())
    assert record["arch"] == "gfx950" and record["wheel_dir"] == "/wheels/"
    assert record["images"][0]["manifest_digest"] == pushed.digest
    assert record["images"][0]["ref"] == pushed.ref(registry.address)
    assert {w["name"]: w["sha256"] for w in record["wheels"]} == listing(out)


def test_opaque_whiteout_and_replacing_the_directory(registry: Registry, tmp_path: Path) -> None:
    a, b, c = (wheel(x) for x in "abc")
    pushed = push_image(registry.address, "rocm-bake/opaque", TAG950, [
        wheel_layer({a: b"A", b: b"B"}),
        Layer([Entry("wheels", kind="dir"), Entry("wheels/.wh..wh..opq"), Entry(f"wheels/{c}", b"C")]),
    ])
    fetch_wheels(ArchSet("gfx950"), [pushed.ref(registry.address)], tmp_path)
    assert listing(tmp_path / "wheels" / "gfx950") == {c: sha(b"C")}
    gone = push_image(registry.address, "rocm-bake/gone", TAG950, [
        wheel_layer({a: b"A"}), Layer([Entry(".wh.wheels")], created_by="RUN rm -rf /wheels"),
    ])
    # the whole wheel directory whited out: no wheels is refused, and nothing is written
    with pytest.raises(RocmBakeError, match="no wheels found"):
        fetch_wheels(ArchSet("gfx950"), [gone.ref(registry.address)], tmp_path / "d2")
    assert not (tmp_path / "d2" / "wheels" / "gfx950").exists()


def test_docker_schema2_and_uncompressed_layers(registry: Registry, tmp_path: Path) -> None:
    a, b = wheel("a"), wheel("b")
    docker = push_image(registry.address, "rocm-bake/docker", TAG950, [wheel_layer({a: b"DA"})], fmt="docker")
    fetch_wheels(ArchSet("gfx950"), [docker.ref(registry.address)], tmp_path / "one")
    assert listing(tmp_path / "one" / "wheels" / "gfx950") == {a: sha(b"DA")}
    plain = push_image(registry.address, "rocm-bake/plain", TAG950, [wheel_layer({b: b"PB"}, compression="none")])
    fetch_wheels(ArchSet("gfx950"), [plain.ref(registry.address)], tmp_path / "two")
    assert listing(tmp_path / "two" / "wheels" / "gfx950") == {b: sha(b"PB")}


@pytest.mark.parametrize("fmt", ["oci", "docker"])
def test_index_picks_linux_amd64(registry: Registry, tmp_path: Path, fmt: str) -> None:
    name = wheel("torch", "2.15.0")
    repo = f"rocm-bake/multi-{fmt}"
    arm = push_image(registry.address, repo, None, [wheel_layer({name: b"arm64 build"})], fmt=fmt, architecture="arm64")
    amd = push_image(registry.address, repo, None, [wheel_layer({name: b"amd64 build"})], fmt=fmt)
    index = push_index(registry.address, repo, TAG950, {"linux/arm64": arm, "linux/amd64": amd}, fmt=fmt)
    result = fetch_wheels(ArchSet("gfx950"), [index.ref(registry.address)], tmp_path)
    assert listing(tmp_path / "wheels" / "gfx950") == {name: sha(b"amd64 build")}
    record = json.loads((tmp_path / "wheels" / "gfx950" / FETCH_MANIFEST).read_text())
    assert result.images[0].manifest_digest == index.digest
    assert record["images"][0]["image_digest"] == amd.digest


def test_index_without_amd64_is_refused(registry: Registry, tmp_path: Path) -> None:
    arm = push_image(registry.address, "rocm-bake/armonly", None, [wheel_layer({wheel("a"): b"x"})], architecture="arm64")
    index = push_index(registry.address, "rocm-bake/armonly", TAG950, {"linux/arm64": arm})
    with pytest.raises(RocmBakeError, match="no linux/amd64 image.*linux/arm64"):
        fetch_wheels(ArchSet("gfx950"), [index.ref(registry.address)], tmp_path)
    assert not (tmp_path / "wheels" / "gfx950").exists()


def test_two_arches_same_filenames_different_content(registry: Registry, tmp_path: Path) -> None:
    name = wheel("amd_aiter", "0.1.28")
    p950 = push_image(registry.address, "rocm-bake/amd_aiter", TAG950, [wheel_layer({name: b"gfx950 code" * 50})])
    p1201 = push_image(registry.address, "rocm-bake/amd_aiter", TAG1201, [wheel_layer({name: b"gfx1201 code" * 9})])
    fetch_wheels(ArchSet("gfx950"), [p950.ref(registry.address)], tmp_path)
    fetch_wheels(ArchSet("gfx1201"), [p1201.ref(registry.address)], tmp_path)
    assert listing(tmp_path / "wheels" / "gfx950") == {name: sha(b"gfx950 code" * 50)}
    assert listing(tmp_path / "wheels" / "gfx1201") == {name: sha(b"gfx1201 code" * 9)}


def test_corrupted_blob_is_a_digest_mismatch_and_writes_nothing(registry: Registry, tmp_path: Path) -> None:
    a = wheel("a")
    pushed = push_image(registry.address, "rocm-bake/corrupt", TAG950, [wheel_layer({a: b"good" * 1000})])
    ref = pushed.ref(registry.address)
    fetch_wheels(ArchSet("gfx950"), [ref], tmp_path / "before")
    blob = registry.blob_path(pushed.layers[0]["digest"])
    data = bytearray(blob.read_bytes())
    data[-40] ^= 0xFF  # inside the gzip stream: still the declared size
    blob.write_bytes(bytes(data))
    with pytest.raises(RocmBakeError, match="digest mismatch"):
        fetch_wheels(ArchSet("gfx950"), [ref], tmp_path / "fresh")
    assert not (tmp_path / "fresh" / "wheels" / "gfx950").exists()
    assert leftovers(tmp_path / "fresh") == []
    # an existing directory is left exactly as it was
    out = tmp_path / "before" / "wheels" / "gfx950"
    before = listing(out)
    (out / FETCH_MANIFEST).write_text((out / FETCH_MANIFEST).read_text().replace(pushed.digest, "sha256:" + "0" * 64))
    with pytest.raises(RocmBakeError, match="digest mismatch"):
        fetch_wheels(ArchSet("gfx950"), [ref], tmp_path / "before")
    assert listing(out) == before and leftovers(tmp_path / "before") == []


def test_truncated_blob_is_refused(registry: Registry, tmp_path: Path) -> None:
    pushed = push_image(registry.address, "rocm-bake/short", TAG950, [wheel_layer({wheel("a"): b"x" * 5000})])
    blob = registry.blob_path(pushed.layers[0]["digest"])
    blob.write_bytes(blob.read_bytes()[:-10])
    with pytest.raises(RocmBakeError, match="bytes|digest"):
        fetch_wheels(ArchSet("gfx950"), [pushed.ref(registry.address)], tmp_path)
    assert not (tmp_path / "wheels" / "gfx950").exists()


@pytest.mark.parametrize("evil", ["../evil-1.0-py3-none-any.whl", "wheels/../../etc/evil-1.0-py3-none-any.whl", "/../wheels/x-1.0-py3-none-any.whl"])
def test_path_traversal_entries_are_refused(registry: Registry, tmp_path: Path, evil: str) -> None:
    pushed = push_image(registry.address, "rocm-bake/evil", TAG950, [
        Layer([Entry("wheels", kind="dir"), Entry(f"wheels/{wheel('ok')}", b"ok"), Entry(evil, b"pwned")])
    ])
    dist = tmp_path / "dist"
    with pytest.raises(RocmBakeError, match="path traversal"):
        fetch_wheels(ArchSet("gfx950"), [pushed.ref(registry.address)], dist)
    assert not (dist / "wheels" / "gfx950").exists() and leftovers(dist) == []
    assert [p for p in tmp_path.rglob("*evil*")] == []


def test_symlinked_wheel_refused_hardlink_to_wheel_kept(registry: Registry, tmp_path: Path) -> None:
    a, b = wheel("a"), wheel("b")
    sym = push_image(registry.address, "rocm-bake/sym", TAG950, [
        Layer([Entry("wheels", kind="dir"), Entry(f"wheels/{a}", kind="symlink", linkname="/etc/passwd")])
    ])
    with pytest.raises(RocmBakeError, match="symlink"):
        fetch_wheels(ArchSet("gfx950"), [sym.ref(registry.address)], tmp_path / "s")
    hard = push_image(registry.address, "rocm-bake/hard", TAG950, [
        Layer([Entry("wheels", kind="dir"), Entry(f"wheels/{a}", b"same"), Entry(f"wheels/{b}", kind="hardlink", linkname=f"wheels/{a}")])
    ])
    fetch_wheels(ArchSet("gfx950"), [hard.ref(registry.address)], tmp_path / "h")
    assert listing(tmp_path / "h" / "wheels" / "gfx950") == {a: sha(b"same"), b: sha(b"same")}
    outside = push_image(registry.address, "rocm-bake/hardout", TAG950, [
        Layer([Entry("etc/secret", b"s"), Entry("wheels", kind="dir"), Entry(f"wheels/{b}", kind="hardlink", linkname="etc/secret")])
    ])
    with pytest.raises(RocmBakeError, match="hard link"):
        fetch_wheels(ArchSet("gfx950"), [outside.ref(registry.address)], tmp_path / "o")


def test_invalid_wheel_filename_refused(registry: Registry, tmp_path: Path) -> None:
    pushed = push_image(registry.address, "rocm-bake/badname", TAG950, [wheel_layer({"notawheel.whl": b"x"})])
    with pytest.raises(RocmBakeError, match="not a valid wheel filename"):
        fetch_wheels(ArchSet("gfx950"), [pushed.ref(registry.address)], tmp_path)


def test_refetch_of_same_digest_is_a_skip_and_new_digest_refetches(registry: Registry, tmp_path: Path) -> None:
    a = wheel("torch", "2.15.0")
    repo = "rocm-bake/refetch"
    first = push_image(registry.address, repo, TAG950, [wheel_layer({a: b"v1" * 100})])
    ref = first.ref(registry.address)
    fetched = fetch_wheels(ArchSet("gfx950"), [ref], tmp_path)
    assert not fetched.skipped and fetched.bytes_fetched > 0
    out = tmp_path / "wheels" / "gfx950"
    inode = out.stat().st_ino
    again = fetch_wheels(ArchSet("gfx950"), [ref], tmp_path)
    assert again.skipped and again.bytes_fetched == 0  # a HEAD answers the digest; no body, no blob
    assert out.stat().st_ino == inode
    pinned = fetch_wheels(ArchSet("gfx950"), [f"{registry.address}/{repo}@{first.digest}"], tmp_path)
    assert pinned.skipped and pinned.bytes_fetched == 0
    second = push_image(registry.address, repo, TAG950, [wheel_layer({a: b"v2" * 100})])
    moved = fetch_wheels(ArchSet("gfx950"), [ref], tmp_path)
    assert not moved.skipped and moved.images[0].manifest_digest == second.digest
    assert listing(out) == {a: sha(b"v2" * 100)}
    # a deleted wheel is noticed: the digest alone is not enough to skip
    (out / a).unlink()
    assert not fetch_wheels(ArchSet("gfx950"), [ref], tmp_path).skipped
    assert listing(out) == {a: sha(b"v2" * 100)}


def test_several_images_one_arch_and_partial_reuse(registry: Registry, tmp_path: Path) -> None:
    t, v = wheel("torch", "2.15.0"), wheel("torchvision", "0.30.0")
    torch = push_image(registry.address, "rocm-bake/torch-multi", TAG950, [wheel_layer({t: b"T" * 300})])
    vision = push_image(registry.address, "rocm-bake/vision-multi", TAG950, [wheel_layer({v: b"V1"})])
    refs = [torch.ref(registry.address), vision.ref(registry.address)]
    fetch_wheels(ArchSet("gfx950"), refs, tmp_path)
    out = tmp_path / "wheels" / "gfx950"
    assert listing(out) == {t: sha(b"T" * 300), v: sha(b"V1")}
    push_image(registry.address, "rocm-bake/vision-multi", TAG950, [wheel_layer({v: b"V2"})])
    result = fetch_wheels(ArchSet("gfx950"), refs, tmp_path)
    assert [i.skipped for i in result.images] == [True, False]
    assert listing(out) == {t: sha(b"T" * 300), v: sha(b"V2")}
    # fewer images: the directory holds exactly what was asked for
    assert not fetch_wheels(ArchSet("gfx950"), refs[:1], tmp_path).skipped
    assert listing(out) == {t: sha(b"T" * 300)}


def test_same_wheel_name_from_two_images_must_match(registry: Registry, tmp_path: Path) -> None:
    t = wheel("triton", "3.5.0")
    one = push_image(registry.address, "rocm-bake/clash-a", TAG950, [wheel_layer({t: b"one"})])
    two = push_image(registry.address, "rocm-bake/clash-b", TAG950, [wheel_layer({t: b"two"})])
    with pytest.raises(RocmBakeError, match="different content"):
        fetch_wheels(ArchSet("gfx950"), [one.ref(registry.address), two.ref(registry.address)], tmp_path)
    assert not (tmp_path / "wheels" / "gfx950").exists() and leftovers(tmp_path) == []


def test_only_wheel_bearing_layers_are_fetched(registry: Registry, tmp_path: Path) -> None:
    a = wheel("a")
    big = Layer([Entry("opt", kind="dir"), Entry("opt/rocm.bin", bytes(range(256)) * 4000)], created_by="COPY /src /opt/ # buildkit")
    other = Layer([Entry("usr/share/doc/x", b"doc" * 1000)], created_by="/bin/sh -c #(nop) ADD file:abc in /usr/share/doc ")
    wheels = wheel_layer({a: b"wheel"})
    pushed = push_image(registry.address, "rocm-bake/selective", TAG950, [big, wheels, other])
    result = fetch_wheels(ArchSet("gfx950"), [pushed.ref(registry.address)], tmp_path)
    image = result.images[0]
    assert (image.layers_fetched, image.layers_skipped) == (1, 2)
    assert result.bytes_fetched == pushed.manifest_bytes + pushed.config["size"] + pushed.layers[1]["size"]
    full = fetch_wheels(ArchSet("gfx950"), [pushed.ref(registry.address)], tmp_path / "all", all_layers=True)
    assert full.images[0].layers_fetched == 3
    assert full.bytes_fetched == pushed.manifest_bytes + pushed.config["size"] + sum(d["size"] for d in pushed.layers)
    # without a history mapping onto the layers, everything is fetched
    bare = push_image(registry.address, "rocm-bake/nohistory", TAG950, [big, wheels], history=False)
    assert fetch_wheels(ArchSet("gfx950"), [bare.ref(registry.address)], tmp_path / "bare").images[0].layers_fetched == 2


def test_layer_selection_rule() -> None:
    wp = ("wheels",)
    assert layer_may_hold_wheels("COPY /dist/*.whl /wheels/ # buildkit", wp)
    assert layer_may_hold_wheels("COPY --from=build /dist/x.whl /wheels/x.whl # buildkit", wp)
    assert layer_may_hold_wheels("ADD rootfs.tar / # buildkit", wp)
    assert layer_may_hold_wheels("RUN rm -f /tmp/x # buildkit", wp)
    assert layer_may_hold_wheels("COPY . src/ # buildkit", wp)  # relative to WORKDIR: unknown
    assert layer_may_hold_wheels(None, wp)
    assert not layer_may_hold_wheels("COPY --chown=1:1 /a /opt/a # buildkit", wp)
    assert not layer_may_hold_wheels("/bin/sh -c #(nop) COPY dir:abc in /wheelsx ", wp)


def test_zstd_layers_are_fetched_and_streamed(registry: Registry, tmp_path: Path) -> None:
    """BuildKit's compression=zstd layers (OCI +zstd media type) read through the declared backports.zstd."""
    payload = bytes(range(256)) * 4096
    pushed = push_image(registry.address, "rocm-bake/zstd", TAG950,
                        [wheel_layer({wheel("a"): payload, wheel("b"): b"small"}, compression="zstd")])
    result = fetch_wheels(ArchSet("gfx950"), [pushed.ref(registry.address)], tmp_path)
    assert listing(tmp_path / "wheels" / "gfx950") == {wheel("a"): sha(payload), wheel("b"): sha(b"small")}
    assert result.bytes_fetched < len(payload)  # the compressed layer, not the inflated bytes
    assert pushed.layers[0]["mediaType"] == "application/vnd.oci.image.layer.v1.tar+zstd"


def test_zstd_layer_of_several_frames_and_a_skippable_frame(registry: Registry, tmp_path: Path) -> None:
    """zstd:chunked-style layers: concatenated frames with a skippable frame between them all read as one tar."""
    a, b = os.urandom(300_000), os.urandom(200_000)
    tar = tar_bytes([Entry("wheels", kind="dir"), Entry(f"wheels/{wheel('a')}", a), Entry(f"wheels/{wheel('b')}", b)])
    cut = len(tar) // 3
    skippable = struct.pack("<II", 0x184D2A50, 11) + b"toc-or-sums"
    blob = zstd_cli(tar[:cut]) + skippable + zstd_cli(tar[cut:])
    pushed = push_image(registry.address, "rocm-bake/zstd-frames", TAG950,
                        [Layer([], compression="zstd", raw=tar, blob=blob)])
    fetch_wheels(ArchSet("gfx950"), [pushed.ref(registry.address)], tmp_path)
    assert listing(tmp_path / "wheels" / "gfx950") == {wheel("a"): sha(a), wheel("b"): sha(b)}


def test_zstd_layers_stream_members_before_the_blob_ends() -> None:
    """Decompression is streamed: the first wheel is readable after a small part of the compressed blob arrived."""
    first, second = os.urandom(1 << 20), os.urandom(8 << 20)
    tar = tar_bytes([Entry(f"wheels/{wheel('a')}", first), Entry(f"wheels/{wheel('b')}", second)])
    blob = zstd_cli(tar)
    consumed = [0]

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(blob), 64 << 10):
            consumed[0] = start + (64 << 10)
            yield blob[start:start + (64 << 10)]

    reader = VerifyingReader(chunks(), f"sha256:{sha(blob)}", len(blob), "layer")
    with open_tar(reader, "zstd") as tar_file:
        member = next(iter(tar_file))
        got = tar_file.extractfile(member).read()
        assert got == first and consumed[0] < len(blob) * 0.3, (consumed[0], len(blob))
    reader.drain()  # the whole blob still verifies


@pytest.mark.parametrize(
    ("ref", "arch", "message"),
    [
        ("{r}/rocm-bake/torch:latest", "gfx950", "pushed last"),
        ("{r}/rocm-bake/torch", "gfx950", "no tag"),
        ("{r}/rocm-bake/torch:gfx1201-rocm10.1.0", "gfx950", "tagged for gfx1201, not gfx950"),
        ("{r}/rocm-bake/torch:rocm10.1.0", "gfx950", "names no architecture"),
        ("{r}/rocm-bake/torch:latest@sha256:" + "a" * 64, "gfx950", "pushed last"),
    ],
)
def test_refused_refs_before_any_download(tmp_path: Path, ref: str, arch: str, message: str) -> None:
    # port 9 on loopback has no registry: a refusal that needed the network would fail differently
    with pytest.raises(RocmBakeError, match=message):
        fetch_wheels(ArchSet(arch), [ref.format(r="127.0.0.1:9")], tmp_path)
    assert not (tmp_path / "wheels").exists()


def test_existing_foreign_directory_is_not_replaced(registry: Registry, tmp_path: Path) -> None:
    pushed = push_image(registry.address, "rocm-bake/foreign", TAG950, [wheel_layer({wheel("a"): b"a"})])
    out = tmp_path / "wheels" / "gfx950"
    out.mkdir(parents=True)
    (out / "mine.txt").write_text("hand-placed")
    with pytest.raises(RocmBakeError, match="rocm-bake did not write"):
        fetch_wheels(ArchSet("gfx950"), [pushed.ref(registry.address)], tmp_path)
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_missing_tag_is_a_clear_404(registry: Registry, tmp_path: Path) -> None:
    with pytest.raises(RocmBakeError, match="HTTP 404: not found"):
        fetch_wheels(ArchSet("gfx950"), [f"{registry.address}/rocm-bake/nothing:{TAG950}"], tmp_path)


def test_cli_fetch_json_and_refusal(registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = wheel("a")
    pushed = push_image(registry.address, "rocm-bake/cli", TAG950, [wheel_layer({a: b"cli"})])
    ref = pushed.ref(registry.address)
    assert main(["wheels", "fetch", "--arch", "gfx950", "--image", ref, "--out", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["wheels"] == [{"name": a, "sha256": sha(b"cli"), "size": 3}] and data["skipped"] is False
    assert not progress.is_quiet(), "--json must not leave progress silenced for later commands"
    assert main(["wheels", "fetch", "--arch", "gfx950", "--image", ref, "--out", str(tmp_path)]) == 0
    assert "unchanged" in capsys.readouterr().out
    latest = f"{registry.address}/rocm-bake/cli:latest"
    assert main(["wheels", "fetch", "--arch", "gfx950", "--image", latest, "--out", str(tmp_path)]) == 2
    assert "whichever architecture was pushed last" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:  # --arch is parsed by argparse: one line, nothing fetched
        main(["wheels", "fetch", "--arch", "GFX950", "--image", ref, "--out", str(tmp_path / "bad")])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.startswith(
        "rocm-bake: error: argument --arch: malformed architecture name 'GFX950'"), err
    assert not (tmp_path / "bad").exists()


def test_an_image_with_no_wheels_is_refused_and_keeps_the_previous_wheels(registry: Registry,
                                                                           tmp_path: Path) -> None:
    """Zero wheels is a broken build, never a reason to swap in an empty wheels/<arch>/."""
    good = push_image(registry.address, "rocm-bake/empty-later", "gfx950-rocm10.1.0",
                      [Layer([Entry("wheels", kind="dir"), Entry(f"wheels/{wheel('torch')}", b"t")])])
    ref = f"{registry.address}/rocm-bake/empty-later:gfx950-rocm10.1.0"
    first = fetch_wheels(ArchSet("gfx950"), [ref], tmp_path)
    assert [w.name for w in first.wheels] == [wheel("torch")] and good.digest
    push_image(registry.address, "rocm-bake/empty-later", "gfx950-rocm10.1.0",
               [Layer([Entry("wheels", kind="dir"), Entry("wheels/README", b"no wheels here")])])
    with pytest.raises(RocmBakeError, match=r"no wheels found under /wheels/ .* left as it was"):
        fetch_wheels(ArchSet("gfx950"), [ref], tmp_path)
    out = tmp_path / "wheels" / "gfx950"
    assert (out / wheel("torch")).read_bytes() == b"t" and (out / FETCH_MANIFEST).is_file()



def test_a_set_of_images_that_yields_no_wheels_is_refused(registry: Registry, tmp_path: Path) -> None:
    a = push_image(registry.address, "rocm-bake/none-a", TAG950, [wheel_layer({wheel("a"): b"a"})])
    first = fetch_wheels(ArchSet("gfx950"), [a.ref(registry.address)], tmp_path)
    assert [w.name for w in first.wheels] == [wheel("a")]
    empty = [push_image(registry.address, f"rocm-bake/none-{x}", TAG950,
                        [Layer([Entry("wheels", kind="dir"), Entry("opt/x.bin", b"x")])]).ref(registry.address)
             for x in "bc"]
    with pytest.raises(RocmBakeError, match=r"no wheels found under /wheels/ in .*none-b.*none-c.* left as it was"):
        fetch_wheels(ArchSet("gfx950"), empty, tmp_path)
    assert listing(tmp_path / "wheels" / "gfx950") == {wheel("a"): sha(b"a")} and leftovers(tmp_path) == []


# -- where the wheels go: --out that cannot hold them -------------------------------


def test_out_that_is_a_file_is_refused_before_any_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    # port 9 on loopback has no registry: a refusal after a request would be a connection error instead
    argv = ["wheels", "fetch", "--arch", "gfx950", "--image", f"127.0.0.1:9/rocm-bake/torch:{TAG950}", "--out", str(afile)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rocm-bake: error: --out {afile}: is not a directory") and "Traceback" not in err
    assert afile.read_text() == "x"


def test_read_only_out_is_refused_before_layers_and_an_unchanged_fetch_still_passes(registry: Registry,
                                                                                  tmp_path: Path) -> None:
    pushed = push_image(registry.address, "rocm-bake/ro", TAG950, [wheel_layer({wheel("a"): os.urandom(2 << 20)})])
    ref = pushed.ref(registry.address)
    dist = tmp_path / "dist"
    dist.mkdir()
    fetch = ["wheels", "fetch", "--arch", "gfx950", "--image", ref, "--out", str(dist)]
    refused = run_read_only(dist, fetch)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert re.fullmatch(rf"rocm-bake: error: cannot write {dist}/wheels/gfx950: {dist} is not writable "
                        rf"\((read-only file system|permission denied)\); nothing was fetched\n", refused.stderr), refused.stderr
    assert list(dist.iterdir()) == []
    fetch_wheels(ArchSet("gfx950"), [ref], dist)  # now a real fetch; the same again on a read-only dist writes nothing
    again = run_read_only(dist, fetch)
    assert again.returncode == 0 and "unchanged" in again.stdout, again.stderr


def test_cli_fetch_shows_one_line_per_layer_and_nothing_with_quiet_or_json(registry: Registry, tmp_path: Path) -> None:
    import subprocess
    import sys

    pushed = push_image(registry.address, "rocm-bake/lines", TAG950, [wheel_layer({wheel("a"): os.urandom(3 << 20)})])
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}

    def fetch(out: Path, *flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "rocm_bake", "wheels", "fetch", "--arch", "gfx950", "--image",
                               pushed.ref(registry.address), "--out", str(out), *flags],
                              capture_output=True, text=True, timeout=120, env=env)

    shown = fetch(tmp_path / "a")
    assert shown.returncode == 0, shown.stderr
    digest = pushed.layers[0]["digest"][7:19]
    assert re.fullmatch(rf"rocm-bake/lines layer {digest}: 3\.[0-9] MB in [0-9.]+ s \([0-9.]+ [KMG]?B/s\)\n",
                        shown.stderr), shown.stderr
    for i, flag in enumerate(("--quiet", "--json")):
        silent = fetch(tmp_path / f"q{i}", flag)
        assert silent.returncode == 0 and silent.stderr == "", silent.stderr
