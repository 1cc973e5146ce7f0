"""A query cascade through the official openai client (issue 44): `--cascade
NAME=SMALL,LARGE` serves a name whose chat requests the small model answers
when its answer's score clears the threshold, and the large one otherwise; the
answer is that model's own, bit for bit, its `model` field and the
X-Folio-Cascade header say which answered, logprobs come back as the client
asked, streamed or not, and /metrics and the web page's live view count the
answers. The threshold is set per request here
(cascade_threshold) so that both ways are taken for sure. SmolLM2-135M is the
small model, Gemma 3 270M the large one."""
import shutil
import subprocess
import time

import httpx
import openai
import pytest

from conftest import BUILD_DIR, model_path, start_folio_server

SMOL = "smollm2-135m-instruct-q4_1"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    gemma = model_path("gemma-3-270m-q4_k_m.gguf")
    s = start_folio_server(tmp_path_factory, "cascade", "-m", f"gemma={gemma}", "--cascade",
                           f"cascade={SMOL},gemma", "--kv-cache-memory", "64MiB", "--max-model-len", "512")
    yield s
    assert s.stop() == 0


def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)


def direct(server, model, **kw):
    return client(server).chat.completions.create(model=model, messages=QUESTION, max_tokens=12, temperature=0, **kw)


def cascade(server, threshold, **kw):
    return client(server).chat.completions.with_raw_response.create(
        model="cascade", messages=QUESTION, max_tokens=12, temperature=0, extra_body={"cascade_threshold": threshold},
        **kw)


def test_a_sure_small_answer_is_the_small_models_own(server):
    raw = cascade(server, -1e9)
    r = raw.parse()
    assert raw.headers["x-folio-cascade"] == "small"
    assert r.model == SMOL
    assert r.choices[0].message.content == direct(server, SMOL).choices[0].message.content
    assert r.choices[0].logprobs is None  # the cascade's own logprobs are not the client's


def test_an_unsure_one_goes_to_the_large_model(server):
    raw = cascade(server, 1e9)
    r = raw.parse()
    assert raw.headers["x-folio-cascade"] == "large"
    assert float(raw.headers["x-folio-cascade-confidence"]) < 1e9
    assert r.model == "gemma"
    assert r.choices[0].message.content == direct(server, "gemma").choices[0].message.content


def test_logprobs_come_back_as_asked(server):
    r = cascade(server, -1e9, logprobs=True, top_logprobs=1).parse()
    want = direct(server, SMOL, logprobs=True, top_logprobs=1)
    assert [t.logprob for t in r.choices[0].logprobs.content] == [t.logprob for t in want.choices[0].logprobs.content]
    assert all(len(t.top_logprobs) == 1 for t in r.choices[0].logprobs.content)


@pytest.mark.parametrize("threshold,by,model", [(-1e9, "small", SMOL), (1e9, "large", "gemma")])
def test_a_streamed_answer_is_the_same_answer(server, threshold, by, model):
    # The small answer is read whole before the cascade decides: a sure one
    # comes as a stream in one delta, an unsure one is the large model's,
    # streamed as it is written. Either way the text, the finish, the usage
    # and the headers are those of the answer unstreamed.
    with client(server).chat.completions.with_streaming_response.create(
            model="cascade", messages=QUESTION, max_tokens=12, temperature=0, stream=True,
            stream_options={"include_usage": True}, extra_body={"cascade_threshold": threshold}) as raw:
        assert raw.headers["x-folio-cascade"] == by
        assert raw.headers["content-type"].startswith("text/event-stream")
        chunks = list(raw.parse())
    want = direct(server, model)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == want.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == \
        [want.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == want.usage.completion_tokens
    assert {c.model for c in chunks} == {model} and len({c.id for c in chunks}) == 1
    assert all(c.choices[0].logprobs is None for c in chunks if c.choices)


def test_what_a_cascade_cannot_do_is_a_400(server):
    with pytest.raises(openai.BadRequestError) as e:
        client(server).chat.completions.create(model="cascade", messages=QUESTION, max_tokens=4, n=2)
    assert e.value.body["param"] == "n"
    r = httpx.post(server.url + "/v1/messages", json={"model": "cascade", "max_tokens": 4, "messages": QUESTION},
                   timeout=60)
    assert r.status_code == 400 and "cascade" in r.text


def test_models_and_metrics_show_the_cascade(server):
    models = {m["id"]: m for m in httpx.get(server.url + "/v1/models", timeout=30).json()["data"]}
    assert models["cascade"]["cascade"]["small"] == SMOL and models["cascade"]["cascade"]["large"] == "gemma"
    page = httpx.get(server.url + "/metrics", timeout=30).text
    assert 'folio:cascade_answers_total{model_name="cascade",answered_by="small"}' in page
    counts = {line.split('answered_by="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
              for line in page.splitlines() if line.startswith("folio:cascade_answers_total")}
    assert counts["small"] >= 2 and counts["large"] >= 1
    assert "cascade cascade: large" in server.log()


def test_the_live_view_shows_the_cascade(server, tmp_path_factory):
    # /api/live counts each cascade's answers by the model that gave them, and
    # the page's live view (headless Chromium) shows the share escalated.
    [c] = httpx.get(server.url + "/api/live", timeout=30).json()["cascades"]
    assert (c["name"], c["small"], c["large"]) == ("cascade", SMOL, "gemma")
    assert c["answered_small"] >= 2 and c["answered_large"] >= 1
    from test_web_page import need
    chromium = need("chromium (Debian package chromium)", shutil.which("chromium"))
    need("chromedriver (Debian package chromium-driver)", shutil.which("chromedriver"))
    from selenium import webdriver
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--user-data-dir=" + str(tmp_path_factory.mktemp("chromium"))]:
        options.add_argument(arg)
    browser = webdriver.Chrome(options=options)
    try:
        browser.get(server.url + "/#live")
        card = "const b = document.querySelector('#live-cascades .card'); return b ? b.textContent : ''"
        deadline = time.monotonic() + 30
        while "cascade answers escalated to gemma" not in browser.execute_script(card):
            assert time.monotonic() < deadline, browser.execute_script(card)
            time.sleep(0.1)
        total = c["answered_small"] + c["answered_large"]  # no request ran since: the same counts
        share = f"{c['answered_large'] / total * 100:.1f}".rstrip("0").rstrip(".")
        assert browser.execute_script(card) == f"{share}%of {total} cascade answers escalated to gemma"
    finally:
        browser.quit()


def test_a_cascade_of_models_not_served_is_refused(tmp_path_factory):
    r = subprocess.run([str(BUILD_DIR / "folio"), "serve", "-m", str(model_path("smollm2-135m-instruct-q4_1.gguf")),
                        "--port", "0", "--cascade", "c=smollm2-135m-instruct-q4_1,nope"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "nope is not a served model" in r.stderr
