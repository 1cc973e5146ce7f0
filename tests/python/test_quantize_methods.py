"""`folio quantize --method gptq|awq|awq+gptq` as a user runs it: each needs calibration
text and say so, and what each writes is a model folio loads, of the same
size as the imatrix file, whose perplexity stays near the input's."""
from __future__ import annotations

import re
import subprocess

import pytest

from conftest import BUILD_DIR, model_path

MODEL = "smollm2-135m-instruct-q4_1.gguf"
CALIBRATION = "/usr/share/common-licenses/Apache-2.0"
EVALUATION = "/usr/share/common-licenses/GPL-3"


def folio(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BUILD_DIR / "folio"), *args], capture_output=True, text=True, timeout=600)


def perplexity(path) -> float:
    done = folio("perplexity", "-m", str(path), "-f", EVALUATION, "-c", "128", "--chunks", "2", "-t", "2")
    assert done.returncode == 0, done.stderr
    return float(re.search(r"Final estimate: PPL = ([\d.]+)", done.stdout + done.stderr).group(1))


@pytest.mark.parametrize("method", ["gptq", "awq", "awq+gptq"])
def test_method_without_calibration_is_refused(tmp_path, method):
    done = folio("quantize", str(model_path(MODEL)), str(tmp_path / "out.gguf"), "--type", "q4_0", "--method", method)
    assert done.returncode != 0
    assert f"--method {method} needs --calibration" in done.stderr
    assert not (tmp_path / "out.gguf").exists()


def test_each_method_writes_a_model_that_loads(tmp_path):
    source = model_path(MODEL)
    sizes, ppl = {}, {"input": perplexity(source)}
    for method in ["imatrix", "gptq", "awq", "awq+gptq"]:
        out = tmp_path / f"{method}.gguf"
        done = folio("quantize", str(source), str(out), "--type", "q4_0", "--method", method, "-t", "2",
                     "--calibration", CALIBRATION, "--calibration-ctx", "128", "--calibration-chunks", "2")
        assert done.returncode == 0, done.stderr
        if method == "gptq":
            assert "(210 by GPTQ, 0 rescaled by AWQ)" in done.stderr
        if method.startswith("awq"):
            assert re.search(r"AWQ: 90 groups searched, \d+ scaled", done.stderr), done.stderr
        if method == "awq+gptq":
            assert "(210 by GPTQ, " in done.stderr
        sizes[method] = out.stat().st_size
        ppl[method] = perplexity(out)
    assert sizes["gptq"] == sizes["imatrix"] == sizes["awq"] == sizes["awq+gptq"]
    for method in sizes:
        assert ppl[method] < 1.5 * ppl["input"], ppl
