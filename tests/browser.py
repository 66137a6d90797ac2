"""Headless Chromium over the DevTools protocol on a pipe (``--remote-debugging-pipe``): load report
pages, run a check script in each, collect JavaScript errors and write full-page PNG screenshots.

No dependency: the protocol is JSON messages separated by NUL bytes on file descriptors 3 (to the
browser) and 4 (from it). The browser runs offline (no sync, updates, background networking), so a page
that needed the network would show it. Used by ``tests/test_report_browser.py`` and, to refresh the
screenshots in ``docs/``, as a script::

    python tests/browser.py PAGE.html OUT.png [WIDTH]
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars")

# What a reader would stumble on, measured in the rendered page: every table wider than its box, and the
# visible text (innerText: what is shown, not the markup).
CHECK_SCRIPT = """(() => {
  const over = [];
  for (const t of document.querySelectorAll('table')) {
    const box = t.parentElement;
    if (box.scrollWidth > box.clientWidth || t.getBoundingClientRect().right >
        document.querySelector('main').getBoundingClientRect().right + 0.5) {
      const head = t.closest('div').previousElementSibling;
      over.push({heading: head ? head.textContent.slice(0, 80) : '', scroll: box.scrollWidth,
                 client: box.clientWidth});
    }
  }
  const figs = [...document.querySelectorAll('figure svg')].map(s => s.getBoundingClientRect().width);
  return {text: document.body.innerText, overflow: over, svgs: figs.length,
          empty_svgs: figs.filter(w => w < 50).length, height: document.documentElement.scrollHeight};
})()"""


def find_chromium() -> str | None:
    """The path of a Chromium-family browser on PATH, or None."""
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless browser for several pages; use as a context manager."""

    def __init__(self, binary: str, timeout_s: float = 20.0):
        self.timeout_s = timeout_s
        self._profile = tempfile.mkdtemp(prefix="prfaas-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # above 4, so that placing them at 3 and 4 in the child cannot overwrite one with the other
        high_r, high_w = os.dup2(to_browser_r, 100), os.dup2(from_browser_w, 101)

        def _fds():  # in the child: the protocol's descriptors 3 and 4
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self._proc = subprocess.Popen(
            [binary, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=_fds, pass_fds=(3, 4))
        for fd in (high_r, high_w):
            os.close(fd)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._send("Browser.close")
        except OSError:
            pass
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    # -- protocol --------------------------------------------------------------------------------------

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        return self._id

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError(f"chromium exited (code {self._proc.poll()})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send a command and return its result; events seen meanwhile are kept in ``events``."""
        want = self._send(method, params, session)
        deadline = time.monotonic() + self.timeout_s
        while True:
            msg = self._read(deadline)
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str, session: str) -> dict:
        deadline = time.monotonic() + self.timeout_s
        while True:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method and ev.get("sessionId") == session:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    # -- pages -----------------------------------------------------------------------------------------

    def check_page(self, path: Path, screenshot: Path | None = None, width: int = 1200) -> dict:
        """Load ``path`` at ``width`` CSS pixels, return `CHECK_SCRIPT`'s findings plus ``errors``
        (uncaught exceptions and console errors) and ``requests`` (every URL the page asked for besides
        itself); with ``screenshot``, write the whole page there as PNG."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable", session=session)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session)
        url = path.resolve().as_uri()
        self.call("Page.navigate", {"url": url}, session)
        self.wait_event("Page.loadEventFired", session)
        found = self.call("Runtime.evaluate", {"expression": CHECK_SCRIPT, "returnByValue": True},
                          session)["result"]["value"]
        mine = [ev for ev in self.events if ev.get("sessionId") == session]
        found["errors"] = [ev["params"]["exceptionDetails"].get("text", "") + " "
                           + str(ev["params"]["exceptionDetails"].get("exception", {}).get("description", ""))
                           for ev in mine if ev["method"] == "Runtime.exceptionThrown"]
        found["errors"] += [ev["params"]["entry"]["text"] for ev in mine
                            if ev["method"] == "Log.entryAdded" and ev["params"]["entry"]["level"] == "error"]
        found["errors"] += [" ".join(str(a.get("value", a.get("description", ""))) for a in ev["params"]["args"])
                            for ev in mine if ev["method"] == "Runtime.consoleAPICalled"
                            and ev["params"]["type"] == "error"]
        found["requests"] = [ev["params"]["request"]["url"] for ev in mine
                             if ev["method"] == "Network.requestWillBeSent" and ev["params"]["request"]["url"] != url]
        self.events = [ev for ev in self.events if ev.get("sessionId") != session]
        if screenshot is not None:
            self.call("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": int(found["height"]), "deviceScaleFactor": 1, "mobile": False},
                      session)
            png = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
            screenshot.write_bytes(base64.b64decode(png["data"]))
        self.call("Target.closeTarget", {"targetId": target})
        return found


if __name__ == "__main__":
    binary = find_chromium()
    if binary is None:
        sys.exit("no chromium on PATH (Debian: apt-get install -y chromium)")
    page, out = Path(sys.argv[1]), Path(sys.argv[2])
    with Browser(binary) as b:
        found = b.check_page(page, out, int(sys.argv[3]) if len(sys.argv) > 3 else 1200)
    print(json.dumps({k: v for k, v in found.items() if k != "text"}, indent=1))
