"""`folio chat` in a real terminal: tmux runs it in a pane and types into it as
a person would (send-keys), and the test reads the screen (capture-pane).
Answers stream, the history is kept and saved, multi-line input, /clear,
Ctrl-C stops an answer without leaving, /exit leaves; `--url` chats with a
running server the same way."""
import json
import os
import shutil
import subprocess
import time
import uuid

import pytest
from conftest import model_path, start_folio_server

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup.sh does)")


class Pane:
    """A tmux session of its own (its own server socket) running one command."""

    def __init__(self, command: list[str], width: int = 200, height: int = 60):
        self.socket = f"folio-test-{uuid.uuid4().hex[:8]}"
        line = " ".join(f"'{a}'" for a in command)
        subprocess.run(["tmux", "-L", self.socket, "new-session", "-d", "-s", "chat", "-x", str(width), "-y",
                        str(height), line], check=True)

    def tmux(self, *args) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "chat", "-S", "-2000").stdout

    def type(self, text: str, enter: bool = True):
        self.tmux("send-keys", "-t", "chat", "-l", text)
        if enter:
            self.tmux("send-keys", "-t", "chat", "Enter")

    def key(self, name: str):
        self.tmux("send-keys", "-t", "chat", name)

    def prompts(self) -> int:
        return sum(1 for line in self.screen().splitlines() if line.startswith(">>>"))

    def wait(self, predicate, timeout: float = 120.0, what: str = ""):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.1)
        pytest.fail(f"timed out waiting for {what}; the screen:\n{self.screen()}")

    def alive(self) -> bool:
        return self.tmux("has-session", "-t", "chat").returncode == 0

    def close(self):
        self.tmux("kill-server")


def folio_chat(build_dir, *args):
    return [str(build_dir / "folio"), "chat", *args]


@pytest.fixture()
def pane(build_dir):
    panes = []

    def make(*args):
        p = Pane(folio_chat(build_dir, *args))
        panes.append(p)
        p.wait(lambda: p.prompts() >= 1, what="the first prompt")
        return p

    yield make
    for p in panes:
        p.close()


def saved(p: Pane, path) -> list:
    before = p.prompts()
    p.type(f"/save {path}")
    p.wait(lambda: p.prompts() > before, what="/save")
    return json.loads(path.read_text())


def test_a_conversation_streams_keeps_its_history_and_saves(pane, tmp_path):
    smol = model_path("smollm2-135m-instruct-q4_1.gguf")
    p = pane("-m", str(smol), "--temp", "0", "-n", "24", "--system", "Be brief.")
    p.type("Name a color.")
    p.wait(lambda: p.prompts() >= 2, what="the first answer")
    p.type("And another one?")
    p.wait(lambda: p.prompts() >= 3, what="the second answer")
    messages = saved(p, tmp_path / "chat.json")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
    assert messages[0]["content"] == "Be brief."
    assert all(m["content"] for m in messages)  # each answer has text
    assert messages[2]["content"].strip().splitlines()[0] in p.screen()  # it was shown as it came

    # Several lines in one message, with """ ... """ and with a trailing backslash.
    before = p.prompts()
    p.type('"""')
    p.type("line one")
    p.type('line two"""')
    p.wait(lambda: p.prompts() > before, what="the multi-line answer")
    before = p.prompts()
    p.type("first\\")
    p.type("second")
    p.wait(lambda: p.prompts() > before, what="the continued-line answer")
    messages = saved(p, tmp_path / "chat2.json")
    assert messages[5]["content"] == "line one\nline two"
    assert messages[7]["content"] == "first\nsecond"

    before = p.prompts()
    p.type("/clear")
    p.wait(lambda: p.prompts() > before, what="/clear")
    assert saved(p, tmp_path / "chat3.json") == [{"role": "system", "content": "Be brief."}]
    p.type("/exit")
    p.wait(lambda: not p.alive(), timeout=30, what="/exit to leave")


def test_ctrl_c_stops_the_answer_not_the_program(pane, tmp_path):
    smol = model_path("smollm2-135m-instruct-q4_1.gguf")
    p = pane("-m", str(smol), "--temp", "0", "-n", "4000", "--ctx", "8192")
    p.type("Write a very long story about the sea, with many chapters.")
    # Let it write for a while, then stop it.
    p.wait(lambda: len(p.screen().strip().splitlines()) > 3, what="the answer to start")
    time.sleep(1.0)
    p.key("C-c")
    p.wait(lambda: "[stopped]" in p.screen(), timeout=30, what="the answer to stop")
    p.wait(lambda: p.prompts() >= 2, timeout=30, what="the prompt after Ctrl-C")
    assert p.alive()
    # Ctrl-C at the prompt drops the line; the chat goes on.
    p.type("half a line", enter=False)
    p.key("C-c")
    p.type("/save " + str(tmp_path / "after.json"))
    p.wait(lambda: (tmp_path / "after.json").exists(), what="/save after Ctrl-C")
    messages = json.loads((tmp_path / "after.json").read_text())
    assert [m["role"] for m in messages] == ["user", "assistant"]  # the stopped answer is kept, the dropped line not
    assert p.alive()
    p.key("C-d")
    p.wait(lambda: not p.alive(), timeout=30, what="Ctrl-D to leave")


def test_a_chat_with_a_server(pane, tmp_path_factory, tmp_path):
    server = start_folio_server(tmp_path_factory, "chat_url")
    try:
        p = pane("--url", server.url, "--temp", "0", "-n", "16")
        p.type("Hello!")
        p.wait(lambda: p.prompts() >= 2, what="the server's answer")
        messages = saved(p, tmp_path / "remote.json")
        assert [m["role"] for m in messages] == ["user", "assistant"] and messages[1]["content"]
    finally:
        server.stop()
