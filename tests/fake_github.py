"""A loopback GitHub for publish tests: REST API, uploads host, and downloads/Pages host.

Three threaded ``http.server`` instances on free 127.0.0.1 ports share one
in-memory state, following GitHub's documented contract for what publishing
uses:

* API (``api_url``): releases CRUD and by tag, assets list (paginated with a
  ``Link`` header)/get/delete, Git Data API blobs/trees/commits/refs with real
  git object hashing (SHA-1 over ``"<type> <len>\\0" + body``, trees in git's
  binary format and order), so a tree id says exactly what it holds.
* Uploads (``uploads_url``, a separate host as uploads.github.com is):
  ``POST /repos/{o}/{r}/releases/{id}/assets?name=`` with ``Content-Length``;
  422 ``already_exists`` on a duplicate name; 422 at 2 GiB (judged from
  Content-Length, so no test sends 2 GiB); a ``digest`` of ``sha256:<hex>``.
* Web (``web_url``): ``/{o}/{r}/releases/download/{tag}/{name}`` redirects
  (302, as github.com does to its object store) to the bytes, and
  ``/pages/{o}/{r}/...`` serves the gh-pages tree, so pip can install from it.

Renamed (``rename``): as GitHub does, the API answers the old name with a redirect to the repository by id
(``/repositories/{id}/...``: 301 for GET and HEAD, 307 for the rest), and serves that path.

Auth: a wrong token is 401 ``Bad credentials`` everywhere; no token may read
(a public repository) but not write (401 ``Requires authentication``).
Faults are injectable per method/path: any status with headers (primary rate
limit with ``x-ratelimit-reset``, secondary with ``Retry-After``, 5xx) and an
upload that dies half-way leaving a ``starter`` asset, as GitHub documents.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

MAX_ASSET = 2 * 1024**3


def git_hash(kind: str, body: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).hexdigest()


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    headers: dict[str, str]
    body: dict[str, Any]
    times: int
    #: Upload only: read half the body, leave a ``starter`` asset, then answer ``status``.
    partial_upload: bool = False
    #: Answer nothing: close the connection with a TCP RST (a dropped or reset connection).
    reset: bool = False


@dataclass
class State:
    owner: str
    repo: str
    token: str
    releases: dict[int, dict[str, Any]] = field(default_factory=dict)
    assets: dict[int, dict[str, Any]] = field(default_factory=dict)
    objects: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    #: The repository's id (what GitHub redirects an old name to) and the names it had before ``rename``.
    repo_id: int = 4242
    former_names: list[str] = field(default_factory=list)
    log: list[tuple[str, str, int]] = field(default_factory=list)
    next_id: int = 1
    lock: threading.RLock = field(default_factory=threading.RLock)

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    # ----------------------------------------------------------- git objects

    def put(self, kind: str, body: bytes) -> str:
        sha = git_hash(kind, body)
        self.objects[sha] = (kind, body)
        return sha

    def tree_entries(self, sha: str) -> list[tuple[str, str, str]]:
        """(mode, name, sha) of a tree object, parsed from git's binary format."""
        kind, body = self.objects[sha]
        assert kind == "tree"
        out, i = [], 0
        while i < len(body):
            sp = body.index(b" ", i)
            nul = body.index(b"\0", sp)
            out.append((body[i:sp].decode(), body[sp + 1:nul].decode(), body[nul + 1:nul + 21].hex()))
            i = nul + 21
        return out

    def flatten(self, sha: str, prefix: str = "") -> dict[str, tuple[str, str]]:
        files: dict[str, tuple[str, str]] = {}
        for mode, name, child in self.tree_entries(sha):
            if mode == "40000":
                files.update(self.flatten(child, f"{prefix}{name}/"))
            else:
                files[f"{prefix}{name}"] = (mode, child)
        return files

    def write_tree(self, files: dict[str, tuple[str, str]]) -> str:
        """Nested tree objects for ``{path: (mode, blob sha)}``, hashed as git does."""
        here: dict[str, tuple[str, str]] = {}
        sub: dict[str, dict[str, tuple[str, str]]] = {}
        for path, entry in files.items():
            head, _, rest = path.partition("/")
            if rest:
                sub.setdefault(head, {})[rest] = entry
            else:
                here[head] = entry
        for name, children in sub.items():
            here[name] = ("40000", self.write_tree(children))
        # git orders entries by name, a tree's name compared as if it ended in "/"
        order = sorted(here, key=lambda n: n + "/" if here[n][0] == "40000" else n)
        body = b"".join(f"{here[n][0]} {n}\0".encode() + bytes.fromhex(here[n][1]) for n in order)
        return self.put("tree", body)

    def commit_info(self, sha: str) -> dict[str, Any]:
        kind, body = self.objects[sha]
        assert kind == "commit"
        head, _, message = body.decode().partition("\n\n")
        tree = next(line.split()[1] for line in head.splitlines() if line.startswith("tree "))
        parents = [line.split()[1] for line in head.splitlines() if line.startswith("parent ")]
        return {"tree": tree, "parents": parents, "message": message}

    def is_ancestor(self, old: str, new: str) -> bool:
        todo, seen = [new], set()
        while todo:
            sha = todo.pop()
            if sha == old:
                return True
            if sha not in seen:
                seen.add(sha)
                todo.extend(self.commit_info(sha)["parents"])
        return False

    def make_commit(self, tree: str, parents: list[str], message: str) -> str:
        who = "rocm-bake-fake <fake@example.invalid> 1700000000 +0000"
        lines = [f"tree {tree}", *[f"parent {p}" for p in parents], f"author {who}", f"committer {who}"]
        return self.put("commit", ("\n".join(lines) + "\n\n" + message).encode())

    # ---------------------------------------------------------- inspection

    def branch_files(self, branch: str = "gh-pages") -> dict[str, bytes]:
        """Every file on ``branch`` (path -> bytes); empty when the branch does not exist."""
        head = self.refs.get(f"refs/heads/{branch}")
        if head is None:
            return {}
        tree = self.commit_info(head)["tree"]
        return {p: self.objects[s][1] for p, (_m, s) in self.flatten(tree).items()}

    def commit_count(self, branch: str = "gh-pages") -> int:
        n, sha = 0, self.refs.get(f"refs/heads/{branch}")
        while sha:
            n += 1
            parents = self.commit_info(sha)["parents"]
            sha = parents[0] if parents else None
        return n

    def release_by_tag(self, tag: str) -> dict[str, Any] | None:
        return next((r for r in self.releases.values() if r["tag_name"] == tag), None)

    def release_assets(self, tag: str) -> dict[str, dict[str, Any]]:
        rel = self.release_by_tag(tag)
        if rel is None:
            return {}
        return {a["name"]: a for a in self.assets.values() if a["release_id"] == rel["id"]}

    def requests(self, method: str | None = None, contains: str = "") -> list[tuple[str, str, int]]:
        return [r for r in self.log if (method is None or r[0] == method) and contains in r[1]]


class FakeGitHub:
    """Start with ``with FakeGitHub() as gh:``; ``gh.endpoints()`` points a client at it."""

    def __init__(self, owner: str = "octo", repo: str = "rocm-bake", token: str = "ghp_fake_token") -> None:
        self.state = State(owner=owner, repo=repo, token=token)
        readme = self.state.put("blob", b"# rocm-bake\n")
        tree = self.state.write_tree({"README.md": ("100644", readme)})
        self.state.refs["refs/heads/main"] = self.state.make_commit(tree, [], "initial")
        self._servers: list[ThreadingHTTPServer] = []
        self._threads: list[threading.Thread] = []

    @property
    def full_name(self) -> str:
        return f"{self.state.owner}/{self.state.repo}"

    def rename(self, full_name: str) -> None:
        """The repository takes a new OWNER/NAME; the old one is answered with GitHub's redirect."""
        with self.state.lock:
            self.state.former_names.append(self.full_name)
            self.state.owner, self.state.repo = full_name.split("/")

    def _serve(self, role: str) -> str:
        handler = type(f"Fake{role.title()}Handler", (_Handler,), {"role": role, "fake": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        self._servers.append(server)
        self._threads.append(thread)
        return f"http://127.0.0.1:{server.server_address[1]}"

    def start(self) -> "FakeGitHub":
        self.api_url = self._serve("api")
        self.uploads_url = self._serve("uploads")
        self.web_url = self._serve("web")
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> "FakeGitHub":
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def endpoints(self):  # -> GitHubEndpoints (imported lazily: this module is a test double)
        from rocm_bake.publish.github import GitHubEndpoints

        return GitHubEndpoints(api_url=self.api_url, uploads_url=self.uploads_url, web_url=self.web_url,
                               pages_url=f"{self.web_url}/pages/{{owner}}/{{repo}}")

    def inject(self, method: str, path: str, status: int, *, times: int = 1, headers: dict[str, str] | None = None,
               body: dict[str, Any] | None = None, partial_upload: bool = False, reset: bool = False) -> None:
        """The next ``times`` requests matching ``method`` and regex ``path`` answer ``status`` (or, with
        ``reset``, nothing: the connection is reset; logged with status 0)."""
        with self.state.lock:
            self.state.faults.append(Fault(method, re.compile(path), status, headers or {},
                                           body or {"message": "injected"}, times, partial_upload, reset))

    def inject_reset(self, method: str, path: str, *, times: int = 1) -> None:
        self.inject(method, path, 0, times=times, reset=True)

    def inject_primary_rate_limit(self, method: str, path: str, reset_in: float) -> None:
        self.inject(method, path, 403, headers={
            "x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-used": "5000",
            "x-ratelimit-reset": str(int(time.time() + reset_in)), "x-ratelimit-resource": "core"},
            body={"message": "API rate limit exceeded for user ID 1."})

    def inject_secondary_rate_limit(self, method: str, path: str, retry_after: int | str) -> None:
        """A secondary limit; ``retry_after`` in seconds, or a string (an HTTP date, as RFC 9110 allows)."""
        self.inject(method, path, 429, headers={"retry-after": str(retry_after)},
                    body={"message": "You have exceeded a secondary rate limit."})


class _Handler(BaseHTTPRequestHandler):
    role = "api"
    fake: FakeGitHub
    protocol_version = "HTTP/1.1"
    #: Headers and body go out in two writes; with Nagle on, the body waits for the client's delayed ACK
    #: (40 ms a request on Linux), a stall real GitHub does not have, which the publish bench would measure.
    disable_nagle_algorithm = True

    def log_message(self, *_args: Any) -> None:
        pass

    # ----------------------------------------------------------- plumbing

    @property
    def st(self) -> State:
        return self.fake.state

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None,
              raw: bytes | None = None, content_type: str = "application/json; charset=utf-8") -> None:
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        # Logged before the answer leaves: a client that has its answer must find it in the log.
        with self.st.lock:
            self.st.log.append((self.command, self.path, status))
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if status != 204:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _json(self) -> Any:
        try:
            return json.loads(self._body() or b"{}")
        except ValueError:
            return None

    def _auth(self, write: bool) -> bool:
        """True when allowed; otherwise the 401 is already sent."""
        value = self.headers.get("Authorization")
        if value is None:
            if not write:
                return True
            self._send(401, {"message": "Requires authentication"})
            return False
        scheme, _, token = value.partition(" ")
        if scheme.lower() not in ("bearer", "token") or token != self.st.token:
            self._send(401, {"message": "Bad credentials"})
            return False
        return True

    def _fault(self, path: str) -> Fault | None:
        with self.st.lock:
            for fault in self.st.faults:
                if fault.times > 0 and fault.method == self.command and fault.path.search(path):
                    fault.times -= 1
                    return fault
        return None

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        path, query = unquote(split.path), parse_qs(split.query)
        fault = self._fault(split.path)
        if fault is not None and fault.reset:
            with self.st.lock:
                self.st.log.append((self.command, self.path, 0))
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if fault is not None and not fault.partial_upload:
            self._body()
            self._send(fault.status, fault.body, fault.headers)
            return
        moved = self._moved(split.path)
        if moved is not None:
            self._body()
            self._send(301 if self.command in ("GET", "HEAD") else 307, {"message": "Moved Permanently",
                                                                       "url": moved}, {"Location": moved})
            return
        try:
            getattr(self, f"_{self.role}")(path, query, fault)
        except KeyError:
            self._send(404, {"message": "Not Found"})

    do_GET = do_POST = do_PATCH = do_DELETE = do_HEAD = lambda self: self._dispatch()  # noqa: E731

    def _repo_path(self, path: str) -> str | None:
        for prefix in (f"/repos/{self.st.owner}/{self.st.repo}", f"/repositories/{self.st.repo_id}"):
            if path == prefix or path.startswith(prefix + "/"):
                return path[len(prefix):]
        return None

    def _moved(self, raw_path: str) -> str | None:
        """Where the API sends a request for a former name of the repository (None: not one)."""
        if self.role != "api":
            return None
        for former in self.st.former_names:
            prefix = f"/repos/{former}/"
            if raw_path.startswith(prefix) or raw_path == prefix[:-1]:
                query = urlsplit(self.path).query
                rest = raw_path[len(prefix) - 1:] + (f"?{query}" if query else "")
                return f"{self.fake.api_url}/repositories/{self.st.repo_id}{rest}"
        return None

    # ----------------------------------------------------------- api host

    def _asset_json(self, a: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in a.items() if k not in ("data", "release_id")}

    def _release_json(self, r: dict[str, Any]) -> dict[str, Any]:
        assets = [self._asset_json(a) for a in self.st.assets.values() if a["release_id"] == r["id"]]
        return {**r, "assets": assets,
                "upload_url": f"{self.fake.uploads_url}/repos/{self.st.owner}/{self.st.repo}/releases/{r['id']}/assets{{?name,label}}"}

    def _api(self, path: str, query: dict[str, list[str]], _fault: Fault | None) -> None:
        rel = self._repo_path(path)
        write = self.command in ("POST", "PATCH", "DELETE")
        if not self._auth(write):
            return
        if rel is None:
            self._send(404, {"message": "Not Found"})
            return
        st = self.st
        with st.lock:
            if rel == "" and self.command == "GET":  # the repository itself, under its name of now
                return self._send(200, {"id": st.repo_id, "name": st.repo, "full_name": f"{st.owner}/{st.repo}",
                                        "owner": {"login": st.owner}})
            if m := re.fullmatch(r"/releases/tags/(.+)", rel):
                r = st.release_by_tag(m[1])
                return self._send(200, self._release_json(r)) if r else self._send(404, {"message": "Not Found"})
            if rel == "/releases" and self.command == "GET":
                return self._send(200, [self._release_json(r) for r in st.releases.values()])
            if rel == "/releases" and self.command == "POST":
                body = self._json() or {}
                if not body.get("tag_name"):
                    return self._send(422, {"message": "Validation Failed",
                                            "errors": [{"resource": "Release", "code": "missing_field", "field": "tag_name"}]})
                if st.release_by_tag(body["tag_name"]):
                    return self._send(422, {"message": "Validation Failed",
                                            "errors": [{"resource": "Release", "code": "already_exists", "field": "tag_name"}]})
                rid = st.new_id()
                st.releases[rid] = {"id": rid, "tag_name": body["tag_name"], "name": body.get("name"),
                                    "body": body.get("body"), "draft": bool(body.get("draft", False)),
                                    "prerelease": bool(body.get("prerelease", False))}
                return self._send(201, self._release_json(st.releases[rid]))
            if m := re.fullmatch(r"/releases/(\d+)", rel):
                r = st.releases[int(m[1])]
                if self.command == "GET":
                    return self._send(200, self._release_json(r))
                if self.command == "PATCH":
                    r.update({k: v for k, v in (self._json() or {}).items() if k in ("name", "body", "draft", "prerelease")})
                    return self._send(200, self._release_json(r))
                if self.command == "DELETE":
                    del st.releases[r["id"]]
                    for aid in [a for a, v in st.assets.items() if v["release_id"] == r["id"]]:
                        del st.assets[aid]
                    return self._send(204)
            if m := re.fullmatch(r"/releases/(\d+)/assets", rel):
                rid = int(m[1])
                if rid not in st.releases:
                    return self._send(404, {"message": "Not Found"})
                items = [self._asset_json(a) for a in st.assets.values() if a["release_id"] == rid]
                per_page = min(100, int(query.get("per_page", ["30"])[0]))
                page = int(query.get("page", ["1"])[0])
                chunk = items[(page - 1) * per_page: page * per_page]
                headers = {}
                if page * per_page < len(items):
                    nxt = f"{self.fake.api_url}{urlsplit(self.path).path}?per_page={per_page}&page={page + 1}"
                    headers["Link"] = f'<{nxt}>; rel="next"'
                return self._send(200, chunk, headers)
            if m := re.fullmatch(r"/releases/assets/(\d+)", rel):
                a = st.assets[int(m[1])]
                if self.command == "GET":
                    return self._send(200, self._asset_json(a))
                if self.command == "DELETE":
                    del st.assets[a["id"]]
                    return self._send(204)
            if rel.startswith("/git/"):
                return self._git(rel[len("/git"):], query)
        self._send(404, {"message": "Not Found"})

    def _git(self, rel: str, query: dict[str, list[str]]) -> None:
        st = self.st
        invalid = lambda msg: self._send(422, {"message": msg})  # noqa: E731
        if m := re.fullmatch(r"/ref/(heads/.+)", rel):
            sha = st.refs[f"refs/{m[1]}"]
            return self._send(200, {"ref": f"refs/{m[1]}", "object": {"sha": sha, "type": "commit"}})
        if m := re.fullmatch(r"/commits/([0-9a-f]{40})", rel):
            if st.objects.get(m[1], ("",))[0] != "commit":
                return self._send(404, {"message": "Not Found"})
            info = st.commit_info(m[1])
            return self._send(200, {"sha": m[1], "tree": {"sha": info["tree"]}, "message": info["message"],
                                    "parents": [{"sha": p} for p in info["parents"]]})
        if m := re.fullmatch(r"/trees/([0-9a-f]{40})", rel):
            if st.objects.get(m[1], ("",))[0] != "tree":
                return self._send(404, {"message": "Not Found"})
            if query.get("recursive"):
                entries = self._recursive(m[1], "")
            else:
                entries = [self._entry(mode, name, sha) for mode, name, sha in st.tree_entries(m[1])]
            return self._send(200, {"sha": m[1], "tree": entries, "truncated": False})
        if (m := re.fullmatch(r"/blobs/([0-9a-f]{40})", rel)) and self.command == "GET":
            import base64

            kind, data = st.objects.get(m[1], ("", b""))
            if kind != "blob":
                return self._send(404, {"message": "Not Found"})
            return self._send(200, {"sha": m[1], "size": len(data), "encoding": "base64",
                                    "content": base64.b64encode(data).decode()})
        if rel == "/blobs" and self.command == "POST":
            import base64

            body = self._json() or {}
            if "content" not in body:
                return invalid("Invalid request.\n\n\"content\" wasn't supplied.")
            data = base64.b64decode(body["content"]) if body.get("encoding") == "base64" else body["content"].encode()
            if len(data) > 100 * 1024**2:
                return invalid("blob too large")
            sha = st.put("blob", data)
            return self._send(201, {"sha": sha, "url": f"{self.fake.api_url}/repos/x/y/git/blobs/{sha}"})
        if rel == "/trees" and self.command == "POST":
            body = self._json() or {}
            files: dict[str, tuple[str, str]] = {}
            if body.get("base_tree"):
                if st.objects.get(body["base_tree"], ("",))[0] != "tree":
                    return invalid("base_tree is not a valid tree")
                files = st.flatten(body["base_tree"])
            for e in body.get("tree", []):
                path = e.get("path", "")
                if not path or path.startswith("/") or path.endswith("/"):
                    return invalid(f"tree.path {path!r} is invalid")
                if "content" in e:
                    files[path] = (e.get("mode", "100644"), st.put("blob", e["content"].encode()))
                elif e.get("sha") is None:
                    files.pop(path, None)
                elif st.objects.get(e["sha"], ("",))[0] != "blob":
                    return invalid(f"tree.sha {e['sha']} is not a valid blob")
                else:
                    files[path] = (e.get("mode", "100644"), e["sha"])
            sha = st.write_tree(files)
            return self._send(201, {"sha": sha, "tree": self._recursive(sha, ""), "truncated": False})
        if rel == "/commits" and self.command == "POST":
            body = self._json() or {}
            if st.objects.get(body.get("tree"), ("",))[0] != "tree":
                return invalid("Tree SHA does not exist")
            parents = body.get("parents", [])
            if any(st.objects.get(p, ("",))[0] != "commit" for p in parents):
                return invalid("Parent SHA does not exist or is not a commit object")
            sha = st.make_commit(body["tree"], parents, body.get("message", ""))
            return self._send(201, {"sha": sha, "tree": {"sha": body["tree"]}, "parents": [{"sha": p} for p in parents]})
        if m := re.fullmatch(r"/refs/(heads/.+)", rel):
            if self.command != "PATCH":
                return self._send(404, {"message": "Not Found"})
            body = self._json() or {}
            ref = f"refs/{m[1]}"
            if ref not in st.refs:
                return invalid("Reference does not exist")
            if st.objects.get(body.get("sha"), ("",))[0] != "commit":
                return invalid("Object does not exist")
            if not body.get("force") and not st.is_ancestor(st.refs[ref], body["sha"]):
                return invalid("Update is not a fast forward")
            st.refs[ref] = body["sha"]
            return self._send(200, {"ref": ref, "object": {"sha": body["sha"], "type": "commit"}})
        if rel == "/refs" and self.command == "POST":
            body = self._json() or {}
            ref = body.get("ref", "")
            if not ref.startswith("refs/") or ref.count("/") < 2:
                return invalid("Reference name is not valid")
            if ref in st.refs:
                return invalid("Reference already exists")
            if st.objects.get(body.get("sha"), ("",))[0] != "commit":
                return invalid("Object does not exist")
            st.refs[ref] = body["sha"]
            return self._send(201, {"ref": ref, "object": {"sha": body["sha"], "type": "commit"}})
        self._send(404, {"message": "Not Found"})

    def _entry(self, mode: str, path: str, sha: str) -> dict[str, Any]:
        kind = "tree" if mode == "40000" else "blob"
        entry: dict[str, Any] = {"path": path, "mode": "040000" if kind == "tree" else mode, "type": kind, "sha": sha}
        if kind == "blob":
            entry["size"] = len(self.st.objects[sha][1])
        return entry

    def _recursive(self, sha: str, prefix: str) -> list[dict[str, Any]]:
        out = []
        for mode, name, child in self.st.tree_entries(sha):
            out.append(self._entry(mode, prefix + name, child))
            if mode == "40000":
                out.extend(self._recursive(child, f"{prefix}{name}/"))
        return out

    # ------------------------------------------------------- uploads host

    def _uploads(self, path: str, query: dict[str, list[str]], fault: Fault | None) -> None:
        rel = self._repo_path(path)
        if not self._auth(write=True):
            return
        m = re.fullmatch(r"/releases/(\d+)/assets", rel or "")
        if self.command != "POST" or m is None:
            return self._send(404, {"message": "Not Found"})
        st = self.st
        if int(m[1]) not in st.releases:
            return self._send(404, {"message": "Not Found"})
        name = (query.get("name") or [""])[0]
        if not name:
            return self._send(422, {"message": "Validation Failed",
                                    "errors": [{"resource": "ReleaseAsset", "code": "missing_field", "field": "name"}]})
        if self.headers.get("Content-Length") is None:
            return self._send(411, {"message": "Length Required"})
        length = int(self.headers["Content-Length"])
        if length >= MAX_ASSET:
            self.close_connection = True
            return self._send(422, {"message": "Validation Failed",
                                    "errors": [{"resource": "ReleaseAsset", "code": "custom", "field": "size",
                                                "message": "size must be less than 2147483648"}]})
        with st.lock:
            dup = any(a["name"] == name and a["release_id"] == int(m[1]) for a in st.assets.values())
        if dup:
            if length < (64 << 20):
                self.rfile.read(length)  # drain, so the client reads our answer
            else:
                self.close_connection = True
            return self._send(422, {"message": "Validation Failed",
                                    "errors": [{"resource": "ReleaseAsset", "code": "already_exists", "field": "name"}]})
        if fault is not None and fault.partial_upload:
            self.rfile.read(length // 2)
            with st.lock:
                aid = st.new_id()
                st.assets[aid] = self._new_asset(aid, int(m[1]), name, b"", "starter")
            self.close_connection = True
            return self._send(fault.status, fault.body, fault.headers)
        data = self.rfile.read(length)
        with st.lock:
            aid = st.new_id()
            st.assets[aid] = self._new_asset(aid, int(m[1]), name, data, "uploaded",
                                             self.headers.get("Content-Type", "application/octet-stream"))
            return self._send(201, self._asset_json(st.assets[aid]))

    def _new_asset(self, aid: int, rid: int, name: str, data: bytes, state: str,
                   content_type: str = "application/octet-stream") -> dict[str, Any]:
        tag = self.st.releases[rid]["tag_name"]
        return {
            "id": aid, "name": name, "label": "", "state": state, "content_type": content_type,
            "size": len(data), "digest": f"sha256:{hashlib.sha256(data).hexdigest()}" if state == "uploaded" else None,
            "download_count": 0, "release_id": rid, "data": data,
            "url": f"{self.fake.api_url}/repos/{self.st.owner}/{self.st.repo}/releases/assets/{aid}",
            "browser_download_url": f"{self.fake.web_url}/{self.st.owner}/{self.st.repo}/releases/download/{quote(tag)}/{quote(name)}",
        }

    # ----------------------------------------------------------- web host

    def _web(self, path: str, _query: dict[str, list[str]], _fault: Fault | None) -> None:
        st = self.st
        base = f"/{st.owner}/{st.repo}"
        with st.lock:
            if m := re.fullmatch(re.escape(base) + r"/releases/download/([^/]+)/([^/]+)", path):
                asset = st.release_assets(m[1]).get(m[2])
                if asset is None or asset["state"] != "uploaded":
                    return self._send(404, raw=b"Not Found", content_type="text/plain")
                return self._send(302, raw=b"", headers={"Location": f"{self.fake.web_url}/_objects/{asset['id']}"})
            if m := re.fullmatch(r"/_objects/(\d+)", path):
                asset = st.assets[int(m[1])]
                return self._send(200, raw=asset["data"], content_type="application/octet-stream")
            pages = f"/pages{base}/"
            if path.startswith(pages) or path == pages.rstrip("/"):
                rel = path[len(pages):]
                files = st.branch_files("gh-pages")
                if rel == "" or rel.endswith("/"):
                    rel += "index.html"
                if rel not in files:
                    return self._send(404, raw=b"Not Found", content_type="text/plain")
                return self._send(200, raw=files[rel], content_type="text/html; charset=utf-8")
        self._send(404, raw=b"Not Found", content_type="text/plain")
