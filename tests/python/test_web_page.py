"""The web page at / in a real browser (headless Chromium from Debian's
packages, driven by selenium through Debian's chromedriver) against a real
`folio serve` with the default model and an API key: the page asks for the
key; a chat reply streams in, shows its figures, and a second turn reuses the
prefix cache; model and user text never become markup; stop aborts the
request (the server's running count drops to 0 and its blocks are freed);
the planner shows the seed's worked examples and the KV-heads control
re-sizes the cache; the live view's used-block count rises during a request
and falls after; the page fits a phone's width; and the same page works in
headless Firefox (Debian's firefox-esr, over WebDriver BiDi). Screenshots go
to build/web-page-screenshots for a reviewer.

Without a browser the tests fail, since scripts/setup.sh installs one; run
outside the set-up, FOLIO_ALLOW_MISSING_BROWSER=1 turns that into a skip
that says what is missing. The plain-HTTP checks (files public, /api/ behind
the key, hostile bodies, --no-web-page) need no browser."""
import json
import os
import shutil
import time

import httpx
import pytest

from conftest import BUILD_DIR, model_path, start_folio_server

KEY = "web-page-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
MODEL = "smollm2-135m-instruct-q4_1"
SHOTS = BUILD_DIR / "web-page-screenshots"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # 64 MiB of KV: 182 blocks of 16 tokens for SmolLM2, a grid one can see.
    s = start_folio_server(tmp_path_factory, "web", "--api-key", KEY, "--max-model-len", "2048",
                           "--kv-cache-memory", "64MiB")
    yield s
    assert s.stop() == 0, s.log()


def live(server):
    r = httpx.get(server.url + "/api/live", headers=AUTH, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def aborted(server):
    """Requests the server has counted as aborted (a client gone, or a stop)."""
    for line in httpx.get(server.url + "/metrics", headers=AUTH, timeout=10).text.splitlines():
        if line.startswith("folio:request_success_total{") and 'finished_reason="abort"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_for(predicate, timeout, what, interval=0.05, detail=None):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}" + (f": {detail()}" if detail else ""))
        time.sleep(interval)


# --- plain HTTP ----------------------------------------------------------------


def test_files_are_public_and_the_api_needs_the_key(server):
    page = httpx.get(server.url + "/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert '<script type="module" src="/web/main.js">' in page.text
    for name in ["main.js", "api.js", "chat.js", "dom.js", "live.js", "markdown.js", "planner.js", "style.css"]:
        r = httpx.get(server.url + "/web/" + name)
        assert r.status_code == 200, name
        assert r.headers["content-type"].startswith("text/css" if name.endswith(".css") else "text/javascript")
    unchanged = httpx.get(server.url + "/web/style.css", headers={"If-None-Match": r.headers["etag"]})
    assert unchanged.status_code == 304 and not unchanged.content
    assert httpx.head(server.url + "/").status_code == 200
    for path in ["/web/", "/web/nothing.js", "/web/%2e%2e/README.md", "/web/%2e%2e%2fapi/live", "/index.html"]:
        assert httpx.get(server.url + path).status_code == 404, path

    for method, path in [("GET", "/api/live"), ("GET", "/api/capacity"), ("POST", "/api/capacity")]:
        r = httpx.request(method, server.url + path, content=b"{}")
        assert r.status_code == 401, (path, r.text)
        assert r.json()["error"]["code"] == "invalid_api_key"
    r = httpx.delete(server.url + "/api/live", headers=AUTH)
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"

    s = live(server)
    assert s["ready"] is True
    kv = s["kv"]
    assert kv["num_blocks"] == len(kv["map"]) == 182 and kv["blocks_per_cell"] == 1
    assert set(kv["map"]) <= set("fucs")
    menus = httpx.get(server.url + "/api/capacity", headers=AUTH, timeout=60).json()
    assert menus["models"][0]["id"] == "loaded" and menus["models"][0]["num_kv_heads"] == 3
    machine = [d for d in menus["devices"] if d["id"] == "this-machine"]
    assert machine and machine[0]["bandwidth_bytes_per_s"] > 1e8 and machine[0]["memory_bytes"] > 1e9


def test_capacity_endpoint_under_hostile_bodies(server):
    def post(content):
        return httpx.post(server.url + "/api/capacity", content=content,
                          headers={**AUTH, "Content-Type": "application/json"}, timeout=30)

    ok = post(json.dumps({"model": "OPT-13B", "device": "A100", "context_tokens": 2048}))
    assert ok.status_code == 200, ok.text
    assert {r["key"]: r["value"] for r in ok.json()["rows"]}["kv_per_token"] == "819,200 B = 800 KiB"
    for body, param in [
        (b"not json", None),
        (b"[]", None),
        (b'{"model": "OPT-13B"', None),
        (b'{"a": ' * 70 + b"1" + b"}" * 70, None),
        (json.dumps({"model": "x" * 100_000, "device": "H100"}).encode(), "model"),
        (json.dumps({"model": "OPT-13B", "device": "H100", "num_users": 10**30}).encode(), "num_users"),
        (json.dumps({"model": "OPT-13B", "device": "H100", "context_tokens": -5}).encode(), "context_tokens"),
        (json.dumps({"model": "OPT-13B", "device": "H100", "num_kv_heads": 7}).encode(), "num_kv_heads"),
        (json.dumps({"model": "OPT-13B", "device": "custom", "memory_bytes": "lots"}).encode(), "memory_bytes"),
        (b'{"model": "OPT-13B", "device": "H100", "kv": "\xff\xfe"}', None),
    ]:
        r = post(body)
        assert r.status_code == 400, (body[:80], r.status_code, r.text[:300])
        error = r.json()["error"]
        assert len(error["message"]) < 1000
        if param:
            assert error["param"] == param, error
    assert httpx.get(server.url + "/health").status_code == 200


def test_no_web_page_flag(tmp_path_factory):
    s = start_folio_server(tmp_path_factory, "noweb", "--no-web-page", "--kv-cache-memory", "16MiB")
    try:
        for path in ["/", "/web/main.js", "/api/live", "/api/capacity"]:
            assert httpx.get(s.url + path).status_code == 404, path
        assert httpx.get(s.url + "/health").status_code == 200
        assert "the web page" not in s.log()
    finally:
        assert s.stop() == 0, s.log()


# --- in the browser ------------------------------------------------------------


def need(what, found):
    if found:
        return found
    message = f"{what} is missing; scripts/setup.sh installs it (run `make test`, or scripts/setup.sh)"
    if os.environ.get("FOLIO_ALLOW_MISSING_BROWSER") == "1":
        pytest.skip(message)
    pytest.fail(message)


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    chromium = need("chromium (Debian package chromium)", shutil.which("chromium"))
    driver_path = need("chromedriver (Debian package chromium-driver)", shutil.which("chromedriver"))
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        need("selenium (scripts/requirements-test.txt)", None)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", "--user-data-dir=" + str(tmp_path_factory.mktemp("chromium"))]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, for test_console_stays_clean
    log = tmp_path_factory.mktemp("chromedriver") / "chromedriver.log"
    driver = webdriver.Chrome(service=Service(executable_path=driver_path, log_output=str(log)), options=options)
    driver.set_script_timeout(30)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def js(driver, script, *args):
    return driver.execute_script(script, *args)


def text(driver, selector):
    return js(driver, "const n = document.querySelector(arguments[0]); return n ? n.textContent : null;", selector)


def shot(driver, name):
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def click(driver, element_id):
    js(driver, "document.getElementById(arguments[0]).click()", element_id)


def set_field(driver, element_id, value, event="change"):
    js(driver, "const n = document.getElementById(arguments[0]); n.value = arguments[1];"
               "n.dispatchEvent(new Event(arguments[2], {bubbles: true}));", element_id, str(value), event)


def last_reply(driver):
    return js(driver, """
        const m = [...document.querySelectorAll('#messages .message.assistant')].pop();
        return m ? {body: m.querySelector('.body').textContent, figures: m.querySelector('.figures').textContent}
                 : {body: '', figures: ''};""")


def send(driver, message):
    set_field(driver, "chat-input", message, "input")
    click(driver, "send")


def wait_reply(driver, timeout=120):
    """Samples the last reply until its figures appear; returns it and the distinct lengths seen."""
    lengths = set()
    deadline = time.monotonic() + timeout
    while True:
        r = last_reply(driver)
        if r["body"]:
            lengths.add(len(r["body"]))
        if "tokens" in r["figures"] and js(driver, "return document.getElementById('stop').hidden"):
            return r, lengths
        if time.monotonic() > deadline:
            pytest.fail(f"no reply finished in {timeout} s: {r}")
        time.sleep(0.01)


@pytest.fixture(scope="module")
def page(browser, server):
    """The page, open, with the API key given through its dialog."""
    browser.get(server.url + "/#chat")
    wait_for(lambda: js(browser, "return document.getElementById('key-dialog').open"), 20, "the key dialog")
    set_field(browser, "key-input", KEY, "input")
    click(browser, "key-save")
    wait_for(lambda: text(browser, "#model-name") == MODEL, 20, "the model's name")
    return browser


def test_chat_streams_a_reply_with_its_figures_and_reuses_the_prefix(page, server):
    click(page, "toggle-settings")
    set_field(page, "set-temperature", 0)
    set_field(page, "set-max-tokens", 96)
    send(page, "Write a short poem about the sea.")
    first, lengths = wait_reply(page)
    assert len(lengths) >= 3, f"the reply did not stream in: lengths seen {sorted(lengths)}"
    assert len(first["body"]) > 20, first
    figures = first["figures"]
    assert "first token" in figures and "tok/s" in figures and "from the prefix cache" in figures, figures

    send(page, "Now give it a title.")
    second, _ = wait_reply(page)
    cached = int(second["figures"].split(" from the prefix cache")[0].rsplit(", ", 1)[1].replace(",", ""))
    assert cached > 0, f"the second turn found nothing in the prefix cache: {second['figures']}"
    shot(page, "chat")

    # After a reload the conversation is still there (local storage), with its figures.
    page.refresh()
    wait_for(lambda: text(page, "#model-name") == MODEL, 20, "the page after a reload")
    assert js(page, "return document.querySelectorAll('#messages .message').length") == 4
    assert "Write a short poem" in text(page, "#conversation-list")
    assert "from the prefix cache" in last_reply(page)["figures"]


def test_no_text_becomes_markup(page):
    hostile = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script> [x](javascript:window.pwned=3)'
    click(page, "new-chat")
    set_field(page, "set-max-tokens", 24)
    send(page, "Repeat exactly: " + hostile)
    wait_reply(page)
    assert js(page, "return document.querySelectorAll('#messages img, #messages script').length") == 0
    assert js(page, "return window.pwned === undefined")
    assert hostile in text(page, "#messages .message.user")
    assert hostile[:20] in text(page, "#conversation-list")  # the chat's title, as text

    # The renderer itself, on what a model might write.
    rendered = page.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/web/markdown.js').then(({renderMarkdown}) => {
          const out = {};
          for (const [name, md] of Object.entries(arguments[0])) {
            const box = document.createElement('div');
            renderMarkdown(md, box);
            out[name] = {text: box.textContent, hrefs: [...box.querySelectorAll('a')].map((a) => a.href),
                         tags: [...box.querySelectorAll('*')].map((n) => n.tagName.toLowerCase())};
          }
          done(out);
        });""", {
        "html": "<b onmouseover=x>hi</b> <iframe src=/></iframe>",
        "link": "[click](javascript:window.pwned=4) [data](data:text/html,<script>1</script>) [ok](https://example.org/a)",
        "code": "```html\n<script>window.pwned=5</script>\n```",
        "spans": "**bold** *em* `a<b>` ~~gone~~",
        "list": "- one\n- two\n\n1. x\n2. y",
        "table": "| a | b |\n|---|--:|\n| <i>1</i> | 2 |",
    })
    assert rendered["html"]["tags"] == ["p"] and "<b onmouseover=x>hi</b>" in rendered["html"]["text"]
    assert rendered["link"]["hrefs"] == ["https://example.org/a"]  # javascript: and data: stay text
    assert rendered["code"]["tags"][:1] == ["pre"] and "<script>" in rendered["code"]["text"]
    assert "script" not in rendered["code"]["tags"]
    assert {"strong", "em", "code", "del"} <= set(rendered["spans"]["tags"])
    assert rendered["list"]["tags"].count("li") == 4 and {"ul", "ol"} <= set(rendered["list"]["tags"])
    assert "td" in rendered["table"]["tags"] and "i" not in rendered["table"]["tags"]
    assert js(page, "return window.pwned === undefined")


def test_stop_aborts_and_the_live_view_follows_the_blocks(page, server):
    # Idle first: no block in use.
    click(page, "tab-live")
    wait_for(lambda: text(page, "#live-used") == "0" and text(page, "#live-running") == "0", 20, "an idle engine")
    assert js(page, "return document.querySelectorAll('#live-grid rect').length") == 182

    click(page, "tab-chat")
    click(page, "new-chat")
    set_field(page, "set-temperature", 0)
    set_field(page, "set-max-tokens", 1500)
    send(page, "Write a long essay about the history of the Roman Empire, in many paragraphs.")
    wait_for(lambda: len(last_reply(page)["body"]) > 40, 60, "the essay to stream in",
             detail=lambda: last_reply(page))
    assert live(server)["num_running"] == 1
    aborted_before = aborted(server)

    click(page, "tab-live")
    used_during = wait_for(lambda: int((text(page, "#live-used") or "0").replace(",", "")), 10,
                           "the live view to show blocks in use")
    assert text(page, "#live-running") == "1"
    assert js(page, "return document.querySelectorAll('#live-grid rect.u, #live-grid rect.s').length") == used_during
    shot(page, "live-during")

    click(page, "tab-chat")
    click(page, "stop")
    reply = wait_for(lambda: (lambda r: r if "stopped" in r["figures"] else None)(last_reply(page)), 10,
                     "the reply to say it was stopped")
    assert len(reply["body"]) > 40 and "tok/s" in reply["figures"], reply  # the rate of what did stream
    wait_for(lambda: (lambda s: s["num_running"] == 0 and s["kv"]["num_used_blocks"] == 0)(live(server)), 5,
             "the server to abort the request and free its blocks")
    assert aborted(server) == aborted_before + 1

    click(page, "tab-live")
    wait_for(lambda: text(page, "#live-used") == "0" and text(page, "#live-running") == "0", 10,
             "the live view to show the blocks freed")
    cached = int(text(page, "#live-cached").replace(",", ""))
    assert cached > 0, "the stopped request's full blocks should stay cached"
    assert js(page, "return document.querySelectorAll('#live-grid rect.c').length") == cached
    assert js(page, "return document.querySelectorAll('#live-history path').length") == 2
    shot(page, "live-after")


def planner_row(driver, key):
    return text(driver, f'#p-rows tr[data-key="{key}"] .value') or ""


def test_planner_shows_the_worked_examples(page):
    click(page, "tab-planner")
    wait_for(lambda: planner_row(page, "kv_per_token"), 60, "the planner's first answer")
    assert js(page, "return document.getElementById('p-model').value") == "loaded"
    # SmolLM2: 2 x 30 layers x 3 KV heads x 64 dims x 2 B.
    wait_for(lambda: planner_row(page, "kv_per_token").startswith("23,040 B"), 10, "the loaded model's figures")
    devices = js(page, "return [...document.querySelectorAll('#p-device option')].map((o) => o.value)")
    assert {"H100", "H200", "A100", "RTX-4090", "this-machine", "custom"} <= set(devices)

    click(page, "example-opt")
    wait_for(lambda: "800 KiB" in planner_row(page, "kv_per_token"), 10, "OPT-13B's 800 KB per token")
    assert planner_row(page, "kv_per_token") == "819,200 B = 800 KiB"
    assert "1,600 MiB" in planner_row(page, "kv_per_user")  # the "1.6 GB" per 2,048-token request
    assert "OPT-13B on A100" in text(page, "#p-verdict")
    shot(page, "planner-opt-13b")

    click(page, "example-llama")
    wait_for(lambda: "512 KiB" in planner_row(page, "kv_per_token"), 10, "Llama 2 7B's 512 KiB per token")
    assert planner_row(page, "kv_total").startswith("68,719,476,736 B = 64 GiB")
    assert "does not fit" in text(page, "#p-verdict") and "at most 27 users" in text(page, "#p-verdict")
    assert js(page, "return document.querySelectorAll('#p-bar rect.weights, #p-bar rect.kv').length") == 2
    assert js(page, "return document.querySelectorAll('#p-curve path').length") == 2
    shot(page, "planner-llama-2-7b")

    # MHA -> GQA -> MQA with the slider: 32 -> 8 -> 1 KV heads.
    choices = js(page, "return +document.getElementById('p-kv-heads').max")
    assert choices == 5  # 1, 2, 4, 8, 16, 32
    set_field(page, "p-kv-heads", 3, "input")
    wait_for(lambda: "128 KiB" in planner_row(page, "kv_per_token"), 10, "8 KV heads")
    assert "GQA" in text(page, "#p-kv-heads-text")
    set_field(page, "p-kv-heads", 0, "input")
    wait_for(lambda: "16 KiB" in planner_row(page, "kv_per_token"), 10, "1 KV head")
    assert "MQA" in text(page, "#p-kv-heads-text") and "fits" in text(page, "#p-verdict")
    shot(page, "planner-llama-2-7b-mqa")

    set_field(page, "p-device", "H200")
    wait_for(lambda: "on H200" in text(page, "#p-verdict"), 10, "the H200")
    set_field(page, "p-users", 0, "input")
    wait_for(lambda: js(page, "return !document.getElementById('p-error').hidden"), 10, "the error for 0 users")
    assert "num_users" in text(page, "#p-error")


def test_fits_a_phone(page):
    page.set_window_size(390, 844)
    try:
        for tab in ["chat", "planner", "live"]:
            click(page, "tab-" + tab)
            time.sleep(0.5)
            width = js(page, "return [document.documentElement.scrollWidth, window.innerWidth]")
            assert width[0] <= width[1] + 1, f"the {tab} tab scrolls sideways on a phone: {width}"
            shot(page, "phone-" + tab)
    finally:
        page.set_window_size(1280, 900)


def test_console_stays_clean(page):
    """No script error and no refusal by the page's own Content-Security-Policy
    in all the tests above. The complaints expected: the first request without
    the key (401, which opens the key dialog) and the planner's query for 0
    users (400, shown on the page)."""
    expected = ["401 (Unauthorized)", "/api/capacity - Failed to load resource: the server responded with a status "
                "of 400 (Bad Request)"]
    errors = [e["message"] for e in page.get_log("browser")
              if e["level"] == "SEVERE" and not any(x in e["message"] for x in expected)]
    assert not errors, errors


# --- in Firefox ----------------------------------------------------------------


def test_firefox_chat_planner_and_live_view(server, tmp_path_factory):
    """The same page in Gecko: the key dialog, a streamed reply, the planner's
    worked example, the live grid (Firefox over WebDriver BiDi, its own protocol)."""
    from firefox_bidi import Firefox

    binary = need("firefox (Debian package firefox-esr)", shutil.which("firefox-esr") or shutil.which("firefox"))
    home = tmp_path_factory.mktemp("firefox")
    firefox = Firefox(binary, home / "profile", home / "firefox.log")
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        firefox.navigate(server.url + "/#planner")
        wait_for(lambda: firefox.js("return document.getElementById('key-dialog').open"), 20, "the key dialog")
        firefox.js(f"const k = document.getElementById('key-input'); k.value = {json.dumps(KEY)};"
                   "document.getElementById('key-save').click();")
        wait_for(lambda: firefox.js("return document.getElementById('model-name').textContent") == MODEL, 20,
                 "the model's name")
        row = "return document.querySelector('#p-rows tr[data-key=\"{}\"] .value')?.textContent ?? ''"
        wait_for(lambda: firefox.js(row.format("kv_per_token")), 60, "the planner's first answer")
        firefox.js("document.getElementById('example-llama').click()")
        wait_for(lambda: "512 KiB" in firefox.js(row.format("kv_per_token")), 10, "Llama 2 7B's 512 KiB per token")
        assert "64 GiB" in firefox.js(row.format("kv_total"))
        firefox.screenshot(SHOTS / "firefox-planner.png")

        firefox.js("document.getElementById('tab-chat').click()")
        firefox.js("""
            const set = (id, v, e) => { const n = document.getElementById(id); n.value = v;
                                        n.dispatchEvent(new Event(e, {bubbles: true})); };
            set('set-temperature', '0', 'change'); set('set-max-tokens', '64', 'change');
            set('chat-input', 'Name three colors.', 'input'); document.getElementById('send').click();""")
        lengths = set()
        reply = "const m = [...document.querySelectorAll('#messages .message.assistant')].pop();" \
                "return [m.querySelector('.body').textContent, m.querySelector('.figures').textContent]"
        deadline = time.monotonic() + 120
        while True:
            body, figures = firefox.js(reply)
            lengths.add(len(body))
            if "from the prefix cache" in figures:
                break
            assert time.monotonic() < deadline, f"no reply in Firefox: {body!r} {figures!r}"
            time.sleep(0.01)
        assert len(body) > 5 and "tok/s" in figures, (body, figures)
        assert len(lengths - {0}) >= 2, f"the reply did not stream in: lengths seen {sorted(lengths)}"
        firefox.screenshot(SHOTS / "firefox-chat.png")

        firefox.js("document.getElementById('tab-live').click()")
        wait_for(lambda: firefox.js("return document.getElementById('live-running').textContent") == "0", 20,
                 "the live view")
        assert firefox.js("return document.querySelectorAll('#live-grid rect').length") == 182
        assert firefox.js("return document.querySelectorAll('#live-grid rect.c').length") > 0
        firefox.screenshot(SHOTS / "firefox-live.png")
    except Exception:
        print(firefox.log()[-4000:])
        raise
    finally:
        firefox.close()


def test_a_person_picks_the_model_when_several_are_served(browser, tmp_path_factory):
    gemma = model_path("gemma-3-270m-q4_k_m.gguf")
    s = start_folio_server(tmp_path_factory, "web-two", "-m", f"gemma={gemma}", "--kv-cache-memory", "64MiB",
                           "--max-model-len", "512")
    try:
        browser.get(s.url + "/#chat")
        wait_for(lambda: js(browser, "return document.getElementById('model-pick').options.length") == 2, 20,
                 "the model menu")
        assert text(browser, "#model-pick option[value=gemma]") == "gemma (unloaded)"
        set_field(browser, "model-pick", "gemma")
        click(browser, "toggle-settings")
        set_field(browser, "set-temperature", 0)
        set_field(browser, "set-max-tokens", 8)
        send(browser, "Hello")
        reply, _ = wait_reply(browser)
        assert reply["body"]
        models = {m["id"]: m["status"]["value"] for m in httpx.get(s.url + "/v1/models", timeout=30).json()["data"]}
        assert models["gemma"] == "loaded", models  # the page's request named the model picked
        assert "POST /v1/chat/completions 200" in s.log()
        # The choice is kept across a reload.
        browser.refresh()
        wait_for(lambda: js(browser, "return document.getElementById('model-pick').value") == "gemma", 20,
                 "the kept choice")
    finally:
        assert s.stop() == 0
