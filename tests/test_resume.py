"""A dropped connection mid-layer resumes with Range from the byte it reached.

A loopback proxy in front of the real ``docker-registry`` cuts the first
transfer of each blob halfway (headers promise the whole blob, the socket
closes early). The registry honours Range, so the fetch resumes; with the
proxy stripping Range (a registry that ignores it) the fetch restarts cleanly.
Either way the whole blob's sha256 is verified and the wheels are intact.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import os
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.registry.extract import fetch_wheels

from tests.registry_fixtures import Entry, Layer, Registry, no_waits, push_image, registry, wheel  # noqa: F401

TAG = "gfx950-rocm10.1.0"


@dataclass
class CuttingProxy:
    upstream: str
    honour_range: bool = True
    #: Cut every transfer of a big blob after this many bytes (None: cut the first transfer halfway, once).
    cut_every: int | None = None
    cut: set[str] = field(default_factory=set)
    requests: list[tuple[str, str | None, int]] = field(default_factory=list)
    address: str = ""


def start_proxy(proxy: CuttingProxy) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            pass

        def do_HEAD(self) -> None:
            self.forward(head=True)

        def do_GET(self) -> None:
            self.forward(head=False)

        def forward(self, head: bool) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            if not proxy.honour_range:
                headers.pop("Range", None)
            conn = http.client.HTTPConnection(proxy.upstream, timeout=30)
            conn.request(self.command, self.path, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            proxy.requests.append((self.path, self.headers.get("Range"), resp.status))
            self.send_response(resp.status)
            for key, value in resp.getheaders():
                if key.lower() not in ("connection", "transfer-encoding"):
                    self.send_header(key, value)
            self.send_header("Connection", "close")
            self.end_headers()
            if head:
                return
            is_layer = "/blobs/" in self.path and len(body) > 100_000
            if is_layer and proxy.cut_every is not None and len(body) > proxy.cut_every:
                proxy.cut.add(self.path)
                self.wfile.write(body[: proxy.cut_every])
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            if is_layer and self.path not in proxy.cut:
                proxy.cut.add(self.path)  # the first transfer of each big blob dies halfway
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    proxy.address = f"127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def big_image(registry: Registry, repo: str) -> tuple[str, bytes]:
    data = os.urandom(4_000_000)  # incompressible: the gzip layer stays over the proxy's cut threshold
    push_image(registry.address, repo, TAG, [Layer([Entry("wheels", kind="dir"),
                                                    Entry(f"wheels/{wheel('torch')}", data)])])
    return repo, data


@pytest.mark.parametrize("honour_range", [True, False], ids=["resumed-with-range", "registry-ignores-range"])
def test_a_dropped_layer_transfer_resumes_and_still_verifies(registry: Registry, tmp_path: Path,
                                                             no_waits: io.StringIO, honour_range: bool) -> None:
    repo, data = big_image(registry, f"rocm-bake/resume-{str(honour_range).lower()}")
    proxy = CuttingProxy(registry.address, honour_range=honour_range)
    server = start_proxy(proxy)
    try:
        result = fetch_wheels(ArchSet("gfx950"), [f"{proxy.address}/{repo}:{TAG}"], tmp_path)
    finally:
        server.shutdown()
    out = tmp_path / "wheels" / "gfx950" / wheel("torch")
    assert out.read_bytes() == data and result.wheels[0].sha256 == hashlib.sha256(data).hexdigest()
    layer_gets = [r for r in proxy.requests if "/blobs/" in r[0] and proxy.cut and r[0] in proxy.cut]
    assert len(layer_gets) == 2, proxy.requests  # the cut transfer, then one more
    second_range, second_status = layer_gets[1][1], layer_gets[1][2]
    assert second_range is not None and second_range.startswith("bytes=")
    assert second_status == (206 if honour_range else 200)
    # 2 MB had arrived: it resumes at once, with a fresh count (a long layer is not failed by drops spread over it)
    line = no_waits.getvalue()
    assert re.search(r"connection dropped after \d+ of \d+ bytes .*: resuming from there at once", line), line
    assert "waiting" not in line
    # resumed: the blob's bytes once (plus the config); restarted: the half it had, then the whole again
    ratio = result.bytes_fetched / len(data)
    assert (1.0 < ratio < 1.05) if honour_range else (1.4 < ratio < 1.6), ratio


def test_drops_with_little_progress_back_off_then_give_up_clearly(registry: Registry, tmp_path: Path,
                                                                  no_waits: io.StringIO) -> None:
    """Every transfer dies after 64 KB: each resume makes a little progress, too little to reset the count."""
    repo, _data = big_image(registry, "rocm-bake/resume-starved")
    proxy = CuttingProxy(registry.address, cut_every=64_000)
    server = start_proxy(proxy)
    try:
        with pytest.raises(RocmBakeError, match=r"blob .*@sha256:[0-9a-f]{64}: gave up after 6 attempts in [0-9.]+ s: "
                                                r"connection dropped after 384000 of \d+ bytes"):
            fetch_wheels(ArchSet("gfx950"), [f"{proxy.address}/{repo}:{TAG}"], tmp_path)
    finally:
        server.shutdown()
    ranges = [r[1] for r in proxy.requests if r[0] in proxy.cut]
    assert ranges == [None] + [f"bytes={64_000 * n}-" for n in range(1, 6)], ranges  # each resumed where it stopped
    waits = [line for line in no_waits.getvalue().splitlines() if ": waiting " in line]
    assert [line.rsplit("(attempt ", 1)[1] for line in waits] == [f"{n} of 6)" for n in range(2, 7)]
    assert list((tmp_path / "wheels").iterdir()) == []  # no wheels/gfx950, no staging left behind
