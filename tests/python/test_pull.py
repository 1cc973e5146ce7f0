"""`folio pull` and `-m ORG/REPO:QUANT` against a stand-in hub (hub_standin.py:
no hub can be reached from here, so a local server speaks the hub's public
API). A pull lands in the hub's cache layout, resumes a cut transfer with a
Range request, refuses bytes that do not match the listed hash, retries a 429,
says what to do on 401/404 and without network, and HF_HUB_OFFLINE=1 reads the
cache alone; a pulled GGUF then runs and serves under its hub name."""
import hashlib
import json
import os
import subprocess
import urllib.request

import pytest
from conftest import FolioServer, model_path
from hub_standin import StandInHub

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"


@pytest.fixture()
def hub():
    h = StandInHub().start()
    yield h
    h.stop()


def folio(build_dir, hub_url, cache, *args, offline=False, token=None, timeout=300):
    env = dict(os.environ)
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HOME"):
        env.pop(k, None)
    env["HF_ENDPOINT"] = hub_url
    env["HF_HUB_CACHE"] = str(cache)
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    if token:
        env["HF_TOKEN"] = token
    return subprocess.run([str(build_dir / "folio"), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def gguf_repo(hub, name="test-org/Tiny-GGUF", **kw):
    files = {
        "README.md": b"# tiny\n",
        "tiny-Q8_0.gguf": b"GGUF" + os.urandom(300_000),
        "tiny-Q4_K_M.gguf": b"GGUF" + os.urandom(200_000),
        "Q2_K/tiny-Q2_K-00001-of-00002.gguf": b"GGUF" + os.urandom(50_000),
        "Q2_K/tiny-Q2_K-00002-of-00002.gguf": b"GGUF" + os.urandom(50_000),
    }
    hub.add(name, files, commit=COMMIT, **kw)
    return files


def test_pull_picks_the_quant_and_fills_the_hub_cache_layout(hub, build_dir, tmp_path):
    files = gguf_repo(hub)
    r = folio(build_dir, hub.url, tmp_path, "pull", "test-org/Tiny-GGUF:Q8_0")
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip()
    assert path == str(tmp_path / "models--test-org--Tiny-GGUF" / "snapshots" / COMMIT / "tiny-Q8_0.gguf")
    sha = hashlib.sha256(files["tiny-Q8_0.gguf"]).hexdigest()
    assert os.readlink(path) == f"../../blobs/{sha}"  # what huggingface_hub writes, so tools share it
    assert open(path, "rb").read() == files["tiny-Q8_0.gguf"]
    assert (tmp_path / "models--test-org--Tiny-GGUF" / "refs" / "main").read_text() == COMMIT
    assert "tiny-Q8_0.gguf" in r.stderr  # the progress names the file
    # Again: nothing downloaded, the same path.
    before = len(hub.requests)
    again = folio(build_dir, hub.url, tmp_path, "pull", "hf://test-org/Tiny-GGUF:q8_0")
    assert again.returncode == 0 and again.stdout.strip() == path
    assert "nothing (all cached)" in again.stderr
    assert not any("/cdn/" in p for p, _ in hub.requests[before:])


def test_a_split_gguf_comes_whole_and_q4_k_m_is_the_default(hub, build_dir, tmp_path):
    files = gguf_repo(hub)
    r = folio(build_dir, hub.url, tmp_path, "pull", "test-org/Tiny-GGUF:Q2_K")
    assert r.returncode == 0, r.stderr
    snap = tmp_path / "models--test-org--Tiny-GGUF" / "snapshots" / COMMIT
    assert r.stdout.strip() == str(snap / "Q2_K/tiny-Q2_K-00001-of-00002.gguf")
    for part in ("Q2_K/tiny-Q2_K-00001-of-00002.gguf", "Q2_K/tiny-Q2_K-00002-of-00002.gguf"):
        assert (snap / part).read_bytes() == files[part]
    d = folio(build_dir, hub.url, tmp_path, "pull", "test-org/Tiny-GGUF")
    assert d.returncode == 0 and d.stdout.strip().endswith("tiny-Q4_K_M.gguf")


def test_a_cut_transfer_resumes_with_range(hub, build_dir, tmp_path):
    files = gguf_repo(hub)
    hub.cut_once.add("tiny-Q8_0.gguf")
    r = folio(build_dir, hub.url, tmp_path, "pull", "test-org/Tiny-GGUF:Q8_0")
    assert r.returncode == 0, r.stderr
    assert open(r.stdout.strip(), "rb").read() == files["tiny-Q8_0.gguf"]
    ranges = [h.get("Range") for p, h in hub.requests if p.startswith("/cdn/") and h.get("Range")]
    assert ranges and ranges[0].startswith("bytes=") and ranges[0] != "bytes=0-", ranges


def test_bytes_that_do_not_match_the_hash_are_refused_and_not_kept(hub, build_dir, tmp_path):
    gguf_repo(hub)
    hub.corrupt.add("tiny-Q8_0.gguf")
    r = folio(build_dir, hub.url, tmp_path, "pull", "test-org/Tiny-GGUF:Q8_0")
    assert r.returncode != 0
    assert "does not match the hub's SHA-256" in r.stderr, r.stderr
    blobs = tmp_path / "models--test-org--Tiny-GGUF" / "blobs"
    assert not any(blobs.iterdir()), list(blobs.iterdir())


def test_429_is_retried_after_retry_after(hub, build_dir, tmp_path):
    gguf_repo(hub)
    hub.api_429 = 2
    r = folio(build_dir, hub.url, tmp_path, "pull", "test-org/Tiny-GGUF:Q8_0")
    assert r.returncode == 0, r.stderr
    assert sum(1 for p, _ in hub.requests if p.startswith("/api/")) == 3


def test_gated_missing_and_unreachable_say_what_to_do(hub, build_dir, tmp_path):
    gguf_repo(hub, name="test-org/Gated-GGUF", gated_token="hf_secret")
    r = folio(build_dir, hub.url, tmp_path, "pull", "test-org/Gated-GGUF:Q8_0")
    assert r.returncode != 0 and "401" in r.stderr and "HF_TOKEN" in r.stderr, r.stderr
    ok = folio(build_dir, hub.url, tmp_path, "pull", "test-org/Gated-GGUF:Q8_0", token="hf_secret")
    assert ok.returncode == 0, ok.stderr
    assert any(h.get("Authorization") == "Bearer hf_secret" for p, h in hub.requests if p.startswith("/api/"))
    missing = folio(build_dir, hub.url, tmp_path, "pull", "test-org/Nope:Q8_0")
    assert missing.returncode != 0 and "404" in missing.stderr, missing.stderr
    gguf_repo(hub)
    no_quant = folio(build_dir, hub.url, tmp_path, "pull", "test-org/Tiny-GGUF:IQ1_S")
    assert no_quant.returncode != 0 and "tiny-Q8_0.gguf" in no_quant.stderr, no_quant.stderr
    down = folio(build_dir, "http://127.0.0.1:9", tmp_path, "pull", "test-org/Tiny-GGUF:Q8_0")
    assert down.returncode != 0 and "HF_HUB_OFFLINE" in down.stderr, down.stderr


def test_offline_reads_the_cache_alone(hub, build_dir, tmp_path):
    gguf_repo(hub)
    r = folio(build_dir, hub.url, tmp_path, "pull", "test-org/Tiny-GGUF:Q8_0")
    assert r.returncode == 0, r.stderr
    hub.stop()
    off = folio(build_dir, "http://127.0.0.1:9", tmp_path, "pull", "test-org/Tiny-GGUF:Q8_0", offline=True)
    assert off.returncode == 0 and off.stdout.strip() == r.stdout.strip(), off.stderr
    never = folio(build_dir, "http://127.0.0.1:9", tmp_path, "pull", "test-org/Other:Q8_0", offline=True)
    assert never.returncode != 0 and "HF_HUB_OFFLINE" in never.stderr, never.stderr
    part = folio(build_dir, "http://127.0.0.1:9", tmp_path, "pull", "test-org/Tiny-GGUF:Q2_K", offline=True)
    assert part.returncode != 0, part.stdout


def test_a_safetensors_checkpoint_takes_what_folio_reads(hub, build_dir, tmp_path):
    hub.add("test-org/Tiny-HF", {
        "config.json": b'{"model_type": "llama"}',
        "tokenizer.json": b"{}",
        "model.safetensors": os.urandom(10_000),
        "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
        "pytorch_model.bin": os.urandom(10_000),
    }, commit=COMMIT)
    r = folio(build_dir, hub.url, tmp_path, "pull", "test-org/Tiny-HF")
    assert r.returncode == 0, r.stderr
    snap = tmp_path / "models--test-org--Tiny-HF" / "snapshots" / COMMIT
    assert r.stdout.strip() == str(snap)
    assert sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if not p.is_dir()) == [
        "1_Pooling/config.json", "config.json", "model.safetensors", "tokenizer.json"]


def test_a_pulled_model_runs_and_serves_under_its_hub_name(hub, build_dir, tmp_path, monkeypatch):
    smol = model_path("smollm2-135m-instruct-q4_1.gguf").read_bytes()
    hub.add("test-org/SmolLM2-GGUF", {"smollm2-135m-instruct-q4_1.gguf": smol}, commit=COMMIT)
    r = folio(build_dir, hub.url, tmp_path, "run", "-m", "test-org/SmolLM2-GGUF:Q4_1", "-p", "Hello", "-n", "4",
              "--temp", "0")
    assert r.returncode == 0, r.stderr
    local = folio(build_dir, hub.url, tmp_path, "run", "-m", str(model_path("smollm2-135m-instruct-q4_1.gguf")),
                  "-p", "Hello", "-n", "4", "--temp", "0")
    assert r.stdout == local.stdout  # the same bytes give the same tokens
    # Served under the name it was asked by, from the cache alone.
    for k, v in {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"}.items():
        monkeypatch.setenv(k, v)
    server = FolioServer([], tmp_path / "serve.log", "test-org/SmolLM2-GGUF:Q4_1").start()
    try:
        with urllib.request.urlopen(server.base_url + "/models", timeout=10) as resp:
            models = json.load(resp)
        assert [m["id"] for m in models["data"]] == ["test-org/SmolLM2-GGUF:Q4_1"]
    finally:
        server.stop()
