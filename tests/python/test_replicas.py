"""Three `folio serve` replicas behind nginx (deploy/nginx) on loopback.
With session affinity a multi-turn chat keeps its prefix-cache hits (close to
one replica's hit rate); round robin loses most of them. Killing a replica
mid-run loses no request that had not started (nginx retries it on the next
replica) and cuts only streams already running on it. The driver is
bench/replicas.py, which makes the figures of bench/RESULTS.md."""
import shutil
import sys

import httpx
import pytest

from conftest import SOURCE_DIR, model_path

if shutil.which("nginx") is None:
    pytest.skip("nginx is missing; run scripts/setup.sh (it installs Debian's nginx)", allow_module_level=True)

sys.path.insert(0, str(SOURCE_DIR / "bench"))
import replicas  # noqa: E402  bench/replicas.py

ARGS = ["--kv-cache-memory", "128MiB", "--max-model-len", "2048"]


class Load:
    replica_args = ARGS
    sessions = 6
    turns = 3
    max_tokens = 16
    # Not 3: with as many sessions in flight as replicas, turns of equal
    # length arrive in a fixed cycle and round robin sends each session to the
    # same replica every turn (it then keeps affinity's hit rate by chance).
    concurrency = 2


@pytest.fixture(scope="module", autouse=True)
def model():
    model_path("smollm2-135m-instruct-q4_1.gguf")


def test_affinity_keeps_the_hit_rate_of_one_replica():
    one = replicas.measure("one", 1, None, Load)
    affinity = replicas.measure("affinity", 3, True, Load)
    round_robin = replicas.measure("round robin", 3, False, Load)
    print(one, affinity, round_robin)
    assert one["errors"] == affinity["errors"] == round_robin["errors"] == 0
    assert affinity["hit_rate"] >= 0.9 * one["hit_rate"], (affinity, one)
    assert round_robin["hit_rate"] < affinity["hit_rate"] - 0.1, (round_robin, affinity)


def test_a_session_sticks_to_one_replica_and_user_is_a_key():
    cluster = replicas.Cluster(3, True, ARGS)
    try:
        def upstream(**kw):
            body = {"model": "folio", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
            body.update(kw.pop("body", {}))
            r = httpx.post(cluster.url + "/v1/chat/completions", json=body, timeout=60, **kw)
            assert r.status_code == 200, r.text
            return r.headers["x-folio-upstream"]

        for key in ("alpha", "beta", "gamma", "delta"):
            seen = {upstream(headers={"X-Session-Id": key}) for _ in range(3)}
            assert len(seen) == 1, (key, seen)
            seen = {upstream(body={"user": "user-" + key}) for _ in range(3)}
            assert len(seen) == 1, (key, seen)
        # Many keys spread over all three replicas.
        assert len({upstream(headers={"X-Session-Id": f"s{i}"}) for i in range(24)}) == 3
    finally:
        cluster.close()


def test_killing_a_replica_loses_no_request_that_had_not_started():
    k = replicas.kill_run(3, sessions=9, max_tokens=120, replica_args=ARGS)
    print(k)
    assert k["requests_on_victim_at_kill"] > 0, k
    assert k["lost"] == 0, k
    # Only streams running on the killed replica were cut.
    assert k["cut"] == k["cut_on_victim"], k
    # Afterwards every request succeeds, none on the dead replica.
    assert k["after_kill"] > 0 and k["after_kill_ok"] == k["after_kill"], k
    assert k["after_kill_on_victim"] == 0, k
    # Requests that met the dead replica first were retried elsewhere and succeeded.
    assert k["retried_off_victim_ok"] > 0, k
