"""Shared pytest fixtures: where the build, the sources and the models are.

CTest runs these tests with FOLIO_BUILD_DIR and FOLIO_SOURCE_DIR set; run by
hand, they fall back to ./build under the repository root.
"""
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("FOLIO_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("FOLIO_BUILD_DIR", SOURCE_DIR / "build"))


def models_dir() -> Path:
    env = os.environ.get("FOLIO_MODELS")
    return Path(env) if env else Path.home() / ".cache" / "folio" / "models"


@pytest.fixture(scope="session")
def build_dir() -> Path:
    return BUILD_DIR


@pytest.fixture(scope="session")
def source_dir() -> Path:
    return SOURCE_DIR


def model_path(file: str) -> Path:
    """Path of a cached model; fails (or skips with FOLIO_ALLOW_MISSING_MODELS=1) when absent."""
    p = models_dir() / file
    if not p.exists():
        if os.environ.get("FOLIO_ALLOW_MISSING_MODELS") == "1":
            pytest.skip(f"{file} missing")
        pytest.fail(f"{file} is not in {models_dir()}; run: python3 scripts/fetch_models.py --all")
    return p


# --- `folio serve` for tests/python/test_server*.py ---------------------------


class FolioServer:
    """A `folio serve` process on a port of its own choosing (--port 0, read
    back from its startup line). Its stderr goes to a file, never to a pipe
    that nobody reads, so that its request log cannot block it."""

    def __init__(self, args, log_path: Path, model: Path):
        self.args = list(args)
        self.log_path = log_path
        self.model = model
        self.proc = None
        self.port = None

    def start(self, wait_ready: bool = True, timeout: float = 60.0):
        binary = BUILD_DIR / "folio"
        if not binary.exists():
            pytest.fail(f"{binary} is missing; build it: cmake --build {BUILD_DIR} --target folio")
        self._log = open(self.log_path, "wb")
        cmd = [str(binary), "serve", "-m", str(self.model), "--port", "0", *self.args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self._log)
        deadline = time.monotonic() + timeout
        while self.port is None:
            m = re.search(r"listening on http://[^:]+:(\d+)", self.log())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                pytest.fail(f"folio serve exited with {self.proc.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                pytest.fail(f"folio serve did not start listening:\n{self.log()}")
            time.sleep(0.005)
        if wait_ready:
            while self.health() != 200:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"folio serve never became ready:\n{self.log()}")
                time.sleep(0.02)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def health(self) -> int:
        """GET /health: liveness (503 only while the model loads)."""
        return self._status("/health")

    def ready(self) -> int:
        """GET /ready: readiness (503 while loading and while draining)."""
        return self._status("/ready")

    def _status(self, path: str) -> int:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig=signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._log.close()
        return code


def start_folio_server(tmp_path_factory, name: str, *args, model: str = "smollm2-135m-instruct-q4_1.gguf",
                       wait_ready: bool = True) -> FolioServer:
    log = tmp_path_factory.mktemp(name) / "serve.log"
    return FolioServer(args, log, model_path(model)).start(wait_ready=wait_ready)
