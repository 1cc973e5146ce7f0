"""A stand-in for the Hugging Face Hub, for `folio pull`'s tests: no hub can be
reached from the machines folio is built on, so this small server speaks the
endpoints folio uses, written from the hub's public API documentation (not
from any client's code):

  GET /api/models/ORG/REPO/revision/REV?blobs=true
      {"id", "sha": COMMIT, "siblings": [{"rfilename", "size", "blobId",
       "lfs": {"sha256", "size", "pointerSize"}}]}; big files are in LFS.
  GET /ORG/REPO/resolve/REV/PATH
      a small file's bytes (ETag: its blob id); for an LFS file a 302 to the
      bytes' storage (here /cdn/SHA256 on the same server), with X-Repo-Commit,
      X-Linked-Etag and X-Linked-Size. Range requests answer 206.
  Errors as the hub gives them: 401 with X-Error-Code GatedRepo without the
  right token, 404 RepoNotFound / EntryNotFound, 429 with Retry-After.

Faults the tests ask for, per file: a transfer cut after half its bytes (once),
bytes that do not match the listed hash, and the first N API calls answered
429. Every request is recorded (path and headers) for the tests to look at.
"""
from __future__ import annotations

import hashlib
import http.server
import json
import threading
import urllib.parse


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, files: dict[str, bytes], commit: str, gated_token: str | None = None):
        self.files = files
        self.commit = commit
        self.gated_token = gated_token

    @staticmethod
    def is_lfs(path: str, data: bytes) -> bool:
        return path.endswith((".gguf", ".safetensors")) or len(data) > 4096


class StandInHub:
    def __init__(self):
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, dict]] = []
        self.cut_once: set[str] = set()       # paths whose next transfer stops at half
        self.corrupt: set[str] = set()        # paths served with a flipped byte
        self.api_429: int = 0                 # API calls still to answer 429
        self.lock = threading.Lock()
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                with hub.lock:
                    hub.requests.append((self.path, dict(self.headers)))
                try:
                    hub._get(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, repo: str, files: dict[str, bytes], commit: str = "0123456789abcdef0123456789abcdef01234567",
            gated_token: str | None = None) -> Repo:
        self.repos[repo] = Repo(files, commit, gated_token)
        return self.repos[repo]

    def start(self) -> "StandInHub":
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    # ---- the endpoints --------------------------------------------------------

    def _send(self, h, status, body=b"", headers=None, content_type="application/json"):
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def _error(self, h, status, code, message):
        self._send(h, status, json.dumps({"error": message}).encode(), {"X-Error-Code": code})

    def _authorized(self, h, repo: Repo) -> bool:
        if repo.gated_token is None:
            return True
        return h.headers.get("Authorization") == f"Bearer {repo.gated_token}"

    def _get(self, h):
        url = urllib.parse.urlsplit(h.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "revision":
            return self._info(h, f"{parts[2]}/{parts[3]}", "/".join(parts[5:]))
        if parts[:1] == ["cdn"] and len(parts) == 3:
            return self._bytes(h, parts[1], parts[2])
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._resolve(h, f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:]))
        self._error(h, 404, "EntryNotFound", "no such endpoint")

    def _info(self, h, name: str, revision: str):
        with self.lock:
            limited = self.api_429 > 0
            self.api_429 -= 1 if limited else 0
        if limited:
            return self._send(h, 429, b'{"error": "slow down"}', {"Retry-After": "1"})
        repo = self.repos.get(name)
        if repo is None:
            return self._error(h, 404, "RepoNotFound", f"{name} not found")
        if not self._authorized(h, repo):
            return self._error(h, 401, "GatedRepo", f"access to {name} is restricted")
        if revision not in ("main", repo.commit):
            return self._error(h, 404, "RevisionNotFound", f"no revision {revision}")
        siblings = []
        for path, data in repo.files.items():
            s = {"rfilename": path, "size": len(data), "blobId": git_blob_id(data)}
            if Repo.is_lfs(path, data):
                s["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            siblings.append(s)
        self._send(h, 200, json.dumps({"id": name, "sha": repo.commit, "siblings": siblings}).encode())

    def _resolve(self, h, name: str, revision: str, path: str):
        repo = self.repos.get(name)
        if repo is None:
            return self._error(h, 404, "RepoNotFound", f"{name} not found")
        if not self._authorized(h, repo):
            return self._error(h, 401, "GatedRepo", f"access to {name} is restricted")
        data = repo.files.get(path)
        if data is None:
            return self._error(h, 404, "EntryNotFound", f"{path} not found")
        if Repo.is_lfs(path, data):
            sha = hashlib.sha256(data).hexdigest()
            return self._send(h, 302, b"", {"Location": f"/cdn/{sha}/{urllib.parse.quote(name, safe='')}",
                                            "X-Repo-Commit": repo.commit, "X-Linked-Etag": f'"{sha}"',
                                            "X-Linked-Size": str(len(data)), "ETag": f'"{git_blob_id(data)}"'})
        self._serve(h, path, data, {"X-Repo-Commit": repo.commit, "ETag": f'"{git_blob_id(data)}"'})

    def _bytes(self, h, sha: str, quoted_repo: str):
        repo = self.repos.get(urllib.parse.unquote(quoted_repo))
        for path, data in (repo.files.items() if repo else []):
            if hashlib.sha256(data).hexdigest() == sha:
                return self._serve(h, path, data, {})
        self._error(h, 404, "EntryNotFound", "no such blob")

    def _serve(self, h, path: str, data: bytes, headers: dict):
        if path in self.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = 0
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes="):-1])
            if start >= len(data) and len(data) > 0:
                return self._send(h, 416, b"", {"Content-Range": f"bytes */{len(data)}"})
        body = data[start:]
        status = 206 if start > 0 else 200
        headers = dict(headers)
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        cut = path in self.cut_once
        if cut:
            self.cut_once.discard(path)
        h.send_response(status)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        if cut:
            # Half of it, then the connection goes: a cut transfer.
            h.wfile.write(body[: len(body) // 2])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(2)
            return
        h.wfile.write(body)
