"""`folio bench` end to end on SmolLM2: the in-process engine and a running
`folio serve` get the same workload and report consistent figures; text
datasets stop at end-of-generation; speculative decoding leaves the outputs
unchanged; bad options fail with a message. (The llama.cpp peer needs the
reference environment, which the test run does not build: bench/RESULTS.md
shows it at work.)"""
import json
import subprocess

import pytest

from conftest import BUILD_DIR, model_path, start_folio_server

MODEL = "smollm2-135m-instruct-q4_1.gguf"


def bench(*args, check=True):
    cmd = [str(BUILD_DIR / "folio"), "bench", "-m", str(model_path(MODEL)), "--no-progress", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def bench_json(*args):
    return json.loads(bench("--json", *args).stdout)


def check_latency_order(stats):
    assert 0 < stats["p50"] <= stats["p90"] <= stats["p99"]


def test_offline_random_workload_generates_every_token():
    r = bench_json("--num-prompts", "6", "--input-len", "24", "--output-len", "12", "--max-num-seqs", "4")
    m = r["folio"]["median"]
    assert r["mode"] == "offline"
    assert r["workload"]["prompt_tokens"] == 6 * 24
    assert m["num_requests"] == 6 and m["num_failed"] == 0
    assert m["prompt_tokens"] == 6 * 24
    assert m["output_tokens"] == 6 * 12  # end-of-generation ignored: exactly output-len each
    assert m["output_throughput"] > 0 and m["request_throughput"] > 0
    assert m["total_throughput"] > m["output_throughput"]
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        check_latency_order(m[key])
    assert m["ttft_ms"]["p50"] < m["e2e_ms"]["p99"]


def test_same_seed_same_workload_and_repetitions_have_their_own(tmp_path):
    def outputs(seed, name):
        f = tmp_path / name
        bench("--num-prompts", "3", "--input-len", "8", "--output-len", "3", "--seed", str(seed), "--repetitions",
              "2", "--no-warmup", "--save-timings", str(f))
        runs = json.loads(f.read_text())
        assert [r["repetition"] for r in runs] == [0, 1]
        return [[r["output_ids"] for r in run["timings"]["requests"]] for run in runs]

    a, b, c = outputs(7, "a.json"), outputs(7, "b.json"), outputs(8, "c.json")
    assert a == b  # greedy, same seed: the same prompts and outputs
    assert all(len(ids) == 3 for run in a for ids in run)
    assert a[0] != a[1]  # repetition r uses seed + r: fresh prompts, no prefix-cache hits
    assert c[0] == a[1]  # ... which is seed 8's first repetition


def test_text_dataset_with_speculation_keeps_the_outputs():
    r = bench_json("--dataset", "grounded", "--num-prompts", "2", "--output-len", "48", "--max-concurrency", "1",
                   "--speculative", "ngram", "--compare-speculation", "--no-prefix-caching")
    cmp = r["no_speculation"]
    assert cmp["compared_outputs"] == 2
    assert cmp["identical_outputs"] == 2  # speculation never changes greedy output
    spec = r["speculation"]
    assert spec["proposed_tokens"] > 0
    assert 0 <= spec["accepted_tokens"] <= spec["proposed_tokens"]
    assert spec["mean_accepted_length"] >= 1
    m = r["folio"]["median"]
    assert 2 <= m["output_tokens"] <= 2 * 48  # text prompts may stop at end-of-generation


def test_server_mode_matches_the_workload(tmp_path_factory):
    server = start_folio_server(tmp_path_factory, "bench-serve", "--kv-cache-memory", "64MiB",
                                "--speculative", "ngram")
    try:
        r = bench_json("--url", server.url, "--num-prompts", "5", "--input-len", "16", "--output-len", "10",
                       "--max-concurrency", "3")
        s = bench_json("--url", server.url, "--dataset", "grounded", "--num-prompts", "2", "--output-len", "32",
                       "--max-concurrency", "1", "--compare-speculation")
    finally:
        assert server.stop() == 0
    m = r["folio"]["median"]
    assert r["mode"] == "server"
    assert m["num_failed"] == 0
    assert m["output_tokens"] == 5 * 10
    assert m["prompt_tokens"] == 5 * 16
    check_latency_order(m["ttft_ms"])
    # The server's own counters, read from /metrics around the speculating runs.
    assert s["speculation"]["proposed_tokens"] > 0
    assert s["no_speculation"]["median"]["output_throughput"]["peer"] > 0
    # The same greedy text with and without speculation: the same token counts.
    assert s["folio"]["median"]["output_tokens"] == s["no_speculation"]["peer_runs"][0]["output_tokens"]


def test_server_mode_reports_an_unreachable_server():
    p = bench("--url", "http://127.0.0.1:9", "--num-prompts", "1", "--input-len", "4", "--output-len", "2",
              "--no-warmup", check=False)
    assert p.returncode != 0
    assert "cannot reach" in p.stderr


@pytest.mark.parametrize("args,message", [
    (["--dataset", "/nonexistent.jsonl"], "cannot open"),
    (["--compare-speculation"], "needs --speculative"),
    (["--url", "http://127.0.0.1:9", "--speculative", "ngram"], "a server speculates as it was started"),
    (["--request-rate", "fast"], "is not a number"),
    (["--suite", "bandwidth", "--bandwidth-size", "lots"], "is not a size"),
])
def test_bad_options_fail_with_a_message(args, message):
    p = bench(*args, check=False)
    assert p.returncode != 0
    assert message in p.stderr


def test_bad_dataset_line_names_the_line(tmp_path):
    f = tmp_path / "prompts.jsonl"
    f.write_text('{"prompt": "one"}\n{"neither": 1}\n')
    p = bench("--dataset", str(f), check=False)
    assert p.returncode != 0
    assert "prompts.jsonl:2" in p.stderr
