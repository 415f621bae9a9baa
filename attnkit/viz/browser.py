"""Drive headless Chromium over the DevTools protocol on a pipe (``--remote-debugging-pipe``): no
websocket, no dependency. Used by the tests to load the pages, click their controls and read what is
drawn, and by ``docs/img/screenshots.py`` for the README's pictures.

    with Browser() as b:
        page = b.open(Path("attention.html"))
        page.eval("document.title")
        page.click("#layer option:nth-child(2)")     # or page.eval("...dispatchEvent(...)")
        page.screenshot("shot.png")
        assert not page.errors                      # console errors and uncaught exceptions

Chromium is found as ``chromium`` / ``chromium-browser`` / ``google-chrome`` on PATH (Debian:
``apt-get install chromium``); ``find_chromium()`` returns None where there is none.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["Browser", "Page", "find_chromium"]

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--mute-audio", "--remote-debugging-pipe"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium process. Messages are JSON, each ended by a NUL byte, on fds 3 (in) and 4 (out)."""

    def __init__(self, executable: str | None = None, *, timeout: float = 30.0):
        exe = executable or find_chromium()
        if exe is None:
            raise FileNotFoundError("no Chromium on PATH (Debian: apt-get install chromium)")
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="attnkit-chromium-")
        to_child_r, self._to_child = os.pipe()  # we write commands, Chromium reads fd 3
        self._from_child, from_child_w = os.pipe()  # Chromium writes fd 4, we read
        os.set_inheritable(to_child_r, True)
        os.set_inheritable(from_child_w, True)

        def wire():  # in the child, before exec: the two pipe ends on fds 3 and 4
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=wire, close_fds=False)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send one command and wait for its answer; events that arrive meanwhile are kept in ``events``."""
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self._next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def open(self, path_or_url, width: int = 1280, height: int = 900) -> Page:
        url = Path(path_or_url).resolve().as_uri() if not str(path_or_url).startswith(("file:", "http", "about:")) \
            else str(path_or_url)
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Runtime", "Log", "Page"):
            page.send(f"{domain}.enable")
        page.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        page.send("Page.navigate", {"url": url})
        page.wait_for("document.readyState === 'complete' && window.attnkitReady !== false")
        return page

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("Browser.close")
            except (RuntimeError, TimeoutError, OSError):
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    """One tab. ``errors``: console errors, uncaught exceptions and failed loads seen so far."""

    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, self.session)

    @property
    def errors(self) -> list[str]:
        out = []
        for e in self.browser.events:
            if e.get("sessionId") != self.session:
                continue
            p = e.get("params", {})
            if e.get("method") == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(d.get("exception", {}).get("description") or d.get("text", "exception"))
            elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif e.get("method") == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    def eval(self, expression: str):
        """The value of a JavaScript expression (promises are awaited), as JSON-compatible Python."""
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise RuntimeError(f"{expression[:80]!r}: {d.get('exception', {}).get('description') or d.get('text')}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.eval(f"!!({expression})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"page: {expression!r} still false after {timeout} s")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the middle of the first element matching ``selector``."""
        x, y = self._centre(selector)
        self.mouse(x, y, "mouseMoved")
        self.mouse(x, y, "mousePressed")
        self.mouse(x, y, "mouseReleased")

    def hover(self, selector: str) -> None:
        """Move the mouse onto the element (from the page's corner, so the move is always seen)."""
        self.mouse(0, 0, "mouseMoved")
        self.mouse(*self._centre(selector), "mouseMoved")

    def _centre(self, selector: str) -> tuple[float, float]:
        box = self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                        "if (!e) return null; e.scrollIntoView({block: 'center', inline: 'center'}); "
                        "const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        if box is None:
            raise ValueError(f"page: nothing matches {selector!r}")
        return box[0], box[1]

    def mouse(self, x: float, y: float, kind: str) -> None:
        params = {"type": kind, "x": x, "y": y, "button": "left" if kind != "mouseMoved" else "none"}
        if kind != "mouseMoved":
            params["clickCount"] = 1
        self.send("Input.dispatchMouseEvent", params)

    def select(self, selector: str, value) -> None:
        """Choose an option of a <select> and fire its change event, as a user's pick does."""
        self.eval(f"(() => {{ const s = document.querySelector({json.dumps(selector)}); "
                  f"s.value = {json.dumps(str(value))}; s.dispatchEvent(new Event('change')); }})()")

    def screenshot(self, path, *, full_page: bool = True, selector: str | None = None) -> Path:
        """A PNG of the whole page, the viewport (``full_page=False``) or one element (``selector``)."""
        params = {"format": "png", "captureBeyondViewport": full_page or selector is not None}
        if selector is not None:
            box = self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null; "
                            "const r = e.getBoundingClientRect(); "
                            "return [r.x + scrollX, r.y + scrollY, r.width, r.height]; })()")
            if box is None:
                raise ValueError(f"page: nothing matches {selector!r}")
            params["clip"] = {"x": box[0], "y": box[1], "width": box[2], "height": box[3], "scale": 1}
        elif full_page:
            w, h = self.eval("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}
        data = self.send("Page.captureScreenshot", params)["data"]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
