"""Headless Firefox driven over WebDriver BiDi, the W3C protocol Firefox
speaks itself (Debian packages no geckodriver): a process with its own
profile, one WebSocket, and the few commands the web page's tests need -
navigate, evaluate a script, take a screenshot."""
import base64
import json
import re
import subprocess
import time
from pathlib import Path

import websocket


class BidiError(RuntimeError):
    pass


class Firefox:
    def __init__(self, binary: str, profile: Path, log_path: Path, width: int = 1280, height: int = 900):
        profile.mkdir(parents=True, exist_ok=True)
        self._log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-remote", "--profile", str(profile), "--remote-debugging-port", "0",
             "--width", str(width), "--height", str(height), "about:blank"],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while True:
            m = re.search(r"WebDriver BiDi listening on (ws://\S+)", log_path.read_text(errors="replace"))
            if m:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise BidiError("firefox did not open its WebDriver BiDi port:\n" + self.log())
            time.sleep(0.05)
        # An Origin header would be refused: the Remote Agent accepts none it was not told of.
        self._ws = websocket.create_connection(m.group(1) + "/session", timeout=120, suppress_origin=True)
        self._next_id = 0
        self.command("session.new", {"capabilities": {}})
        self.context = self.command("browsingContext.getTree", {})["contexts"][0]["context"]

    def log(self) -> str:
        return self._log_path.read_text(errors="replace")

    def command(self, method: str, params: dict) -> dict:
        self._next_id += 1
        self._ws.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") != self._next_id:
                continue  # an event: none is subscribed to, but skip any
            if message.get("type") == "error":
                raise BidiError(f"{method}: {message.get('error')}: {message.get('message')}")
            return message["result"]

    def navigate(self, url: str):
        self.command("browsingContext.navigate", {"context": self.context, "url": url, "wait": "complete"})

    def js(self, body: str):
        """Runs `body` (a function body; it may await) in the page; returns what it returns, through JSON."""
        expression = f"(async () => JSON.stringify(await (async () => {{ {body} }})() ?? null))()"
        r = self.command("script.evaluate", {"expression": expression, "target": {"context": self.context},
                                             "awaitPromise": True})
        if r["type"] == "exception":
            raise BidiError(f"script failed: {r['exceptionDetails'].get('text')}")
        return json.loads(r["result"]["value"])

    def screenshot(self, path: Path):
        data = self.command("browsingContext.captureScreenshot", {"context": self.context})["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self):
        try:
            if getattr(self, "_ws", None):
                try:
                    self.command("browser.close", {})
                except (BidiError, OSError, websocket.WebSocketException):
                    pass
                self._ws.close()
        finally:
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self._log.close()
