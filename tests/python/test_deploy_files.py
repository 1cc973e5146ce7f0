"""deploy/: nginx accepts the affinity config as shipped (nginx -t), and the
Kubernetes manifests parse, point their probes at folio's real endpoints
(/health for liveness, /ready for readiness), drain within the grace period,
and the InferencePool selects the Deployment's pods on the port folio
serves."""
import shutil
import subprocess

import httpx
import pytest

from conftest import SOURCE_DIR, start_folio_server

yaml = pytest.importorskip("yaml", reason="PyYAML is missing; run scripts/setup.sh")
DEPLOY = SOURCE_DIR / "deploy"


def load_all():
    docs = []
    for f in sorted((DEPLOY / "k8s").glob("*.yaml")):
        docs += [(f.name, d) for d in yaml.safe_load_all(f.read_text()) if d]
    return docs


def kind(docs, k):
    found = [d for _, d in docs if d["kind"] == k]
    assert found, f"no {k} in deploy/k8s"
    return found[0]


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is missing; run scripts/setup.sh")
def test_nginx_accepts_the_config(tmp_path):
    for f in (DEPLOY / "nginx").glob("*.conf"):
        shutil.copy(f, tmp_path / f.name)
    r = subprocess.run(["nginx", "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e",
                        str(tmp_path / "startup.log")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    conf = (tmp_path / "folio.conf").read_text()
    assert "non_idempotent" in conf and "proxy_buffering off" in conf
    assert "hash $folio_affinity consistent" in (tmp_path / "folio-balance.conf").read_text()


def test_manifests_probe_real_endpoints(tmp_path_factory):
    docs = load_all()
    dep = kind(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    port = next(p["containerPort"] for p in c["ports"] if p.get("name") == "http")
    assert str(port) in " ".join(map(str, c["args"]))
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert c["startupProbe"]["httpGet"]["path"] == "/health"
    # SIGTERM drains for --shutdown-timeout seconds; the pod must be given longer.
    args = [str(a) for a in c["args"]]
    shutdown = float(args[args.index("--shutdown-timeout") + 1])
    assert pod["terminationGracePeriodSeconds"] > shutdown
    assert "preStop" in c["lifecycle"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    svc = kind(docs, "Service")
    assert all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())
    pool = kind(docs, "InferencePool")
    assert pool["apiVersion"].startswith("inference.networking")
    assert all(labels.get(k) == v for k, v in pool["spec"]["selector"]["matchLabels"].items())
    assert pool["spec"]["targetPorts"][0]["number"] == port

    # The probes' paths answer as the manifests expect on a live server.
    s = start_folio_server(tmp_path_factory, "deploy-probes")
    try:
        for path in ("/health", "/ready", "/metrics"):
            assert httpx.get(s.url + path, timeout=10).status_code == 200, path
        text = httpx.get(s.url + "/metrics", timeout=10).text
        assert "vllm:num_requests_waiting{" in text and "vllm:kv_cache_usage_perc{" in text
    finally:
        assert s.stop() == 0
