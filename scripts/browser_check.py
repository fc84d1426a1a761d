#!/usr/bin/env python3
"""Open a self-contained HTML report in headless Chromium and check it.

Usage::

    browser_check.py REPORT.html --screenshot OUT.png [--width 1280] [--height 800]
                     [--media screen|print] [--timeout 30] [--expect-svg] [--json]

Python 3 standard library only. Chromium is driven through the DevTools
protocol over ``--remote-debugging-pipe`` (the browser reads commands from
its fd 3 and writes replies and events to its fd 4, one JSON message each,
NUL-terminated), headless, with a fresh profile in a temporary directory
that is removed afterwards. The page is opened by its ``file://`` URL at a
laptop viewport (1280 x 800 CSS pixels by default; ``--media print`` with
``--width 718`` lays it out as an A4 page with 1 cm margins would be) and,
once loaded, fails the check on:

- ``console``: a ``console.error`` / ``console.assert`` message;
- ``exception``: an uncaught exception;
- ``log``: a browser log entry of level error (e.g. a resource that
  failed to load);
- ``network``: a request whose scheme is neither ``file:`` nor ``data:``
  (the report must be self-contained); such requests are blocked, never
  sent;
- ``svg``: an ``<svg>`` element with zero width or height (a chart that
  did not render), or no ``<svg>`` at all with ``--expect-svg``;
- ``overflow``: an element whose content is wider than its box
  (``scrollWidth > clientWidth + 1``) while its computed ``overflow-x`` is
  ``visible`` (``auto``/``scroll`` boxes scroll on purpose, ``hidden``/
  ``clip`` boxes clip on purpose); only the innermost of nested overflowing
  elements is named; and a page wider than the viewport;
- ``load``: the file could not be opened or never finished loading.

A full-page PNG screenshot is written to OUT.png (parent folders created,
written atomically) whether or not the checks pass.

Chromium: ``$QPORT_CHROMIUM``, else the first of ``chromium``,
``chromium-browser``, ``google-chrome`` on PATH (``bash scripts/test`` runs
``scripts/ensure-chromium``, which installs Debian's ``chromium``).

Output: one line per failure (``kind: message``) and a summary on stdout;
with ``--json`` instead a JSON object with ``ok``, ``failures`` (objects
with ``kind`` and ``message``), ``svg_count``, ``svgs`` (each SVG's
``width``/``height`` in CSS pixels and its ``label``), ``screenshot``,
``page`` and ``viewport`` (``width``/``height``), ``media``, ``url`` and
``browser``.

Exit status: 0 every check passed; 1 a check failed; 2 usage error, a
missing page, or Chromium could not be found, started or did not answer in
time (``--timeout`` seconds, 30 by default, for the whole run). The browser
is always killed (its whole process group) before exit.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
ALLOWED_SCHEMES = ("file", "data")
# Schemes of requests that would leave the machine: blocked before they are sent.
BLOCKED_PATTERNS = ["http://*", "https://*", "ws://*", "wss://*", "ftp://*"]

# Runs in the page after load; returns the SVG sizes and the overflowing boxes.
PAGE_CHECKS = r"""
(() => {
  const label = (el) => {
    let s = el.tagName.toLowerCase();
    if (el.id) s += '#' + el.id;
    const cls = el.getAttribute('class');
    if (cls) s += '.' + cls.trim().split(/\s+/).join('.');
    const text = (el.textContent || '').replace(/\s+/g, ' ').trim();
    if (text) s += ' "' + (text.length > 60 ? text.slice(0, 60) + '…' : text) + '"';
    return s;
  };
  const svgs = Array.from(document.querySelectorAll('svg')).map((el) => {
    const r = el.getBoundingClientRect();
    return { width: r.width, height: r.height, label: label(el) };
  });
  const over = [];
  for (const el of document.body ? document.body.querySelectorAll('*') : []) {
    if (el instanceof SVGElement) continue;
    const cs = getComputedStyle(el);
    if (cs.display === 'none' || cs.overflowX !== 'visible') continue;
    if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) over.push(el);
  }
  // Only the innermost: an ancestor's overflow is its descendant's.
  const inner = over.filter((el) => !over.some((o) => o !== el && el.contains(o)));
  const de = document.documentElement;
  const body = document.body;
  return {
    svgs,
    overflow: inner.map((el) => ({
      label: label(el), content: el.scrollWidth, box: el.clientWidth })),
    page_width: Math.max(de.scrollWidth, body ? body.scrollWidth : 0),
    viewport_width: de.clientWidth,
    ready: document.readyState,
  };
})()
"""


class Usage(Exception):
    """A usage or input error (exit 2)."""


class BrowserError(Exception):
    """Chromium could not be found, started, or did not answer (exit 2)."""


def find_chromium() -> tuple[str, list[str]]:
    """The browser binary and the names tried, or BrowserError."""
    env = os.environ.get("QPORT_CHROMIUM", "")
    if env:
        found = shutil.which(env)
        if found:
            return found, [env]
        raise BrowserError(
            f"QPORT_CHROMIUM={env!r} is not an executable (nor a command on PATH); "
            "point it at a Chromium binary, or unset it to use chromium, "
            "chromium-browser or google-chrome from PATH"
        )
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found, list(CANDIDATES)
    raise BrowserError(
        "no Chromium found: QPORT_CHROMIUM is not set and none of "
        + ", ".join(CANDIDATES)
        + " is on PATH. Run `bash scripts/ensure-chromium` (the README's test command "
        "`bash scripts/test` does, installing Debian's chromium package) or set "
        "QPORT_CHROMIUM to a Chromium binary."
    )


class Browser:
    """A headless Chromium with a DevTools pipe, in its own process group."""

    def __init__(self, binary: str, width: int, height: int, deadline: float):
        self.deadline = deadline
        self.binary = binary
        self.profile = tempfile.mkdtemp(prefix="qport-chromium-")
        self.log_path = os.path.join(self.profile, "chromium.log")
        self.next_id = 0
        self.buffer = b""
        self.events: list[dict] = []
        self.closed = False
        args = [
            binary,
            "--headless=new",
            "--disable-gpu",
            "--remote-debugging-pipe",
            f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--mute-audio",
            "about:blank",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def wire_fds() -> None:
            # In the child: its fd 3 reads our commands, its fd 4 carries its replies.
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(3, 4),
                preexec_fn=wire_fds,
                start_new_session=True,
            )
        except OSError as e:
            os.close(self.to_browser)
            os.close(self.from_browser)
            shutil.rmtree(self.profile, ignore_errors=True)
            raise BrowserError(f"cannot start {binary}: {e}") from e
        finally:
            log.close()
            os.close(to_browser_r)
            os.close(from_browser_w)

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self.next_id += 1
        msg: dict = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            try:
                n = os.write(self.to_browser, data)
            except BrokenPipeError as e:
                raise BrowserError(self._died(f"sending {method}")) from e
            data = data[n:]
        return self.next_id

    def _died(self, doing: str) -> str:
        code = self.proc.poll()
        state = f"exited with status {code}" if code is not None else "closed its DevTools pipe"
        tail = self.log_tail()
        return f"Chromium ({self.binary}) {state} while {doing}" + (
            f"; its last output:\n{tail}" if tail else ""
        )

    def _read_one(self, until: float, doing: str) -> dict | None:
        """The next message, or None when `until` passed first."""
        while b"\0" not in self.buffer:
            left = min(until, self.deadline) - time.monotonic()
            if left <= 0:
                if time.monotonic() >= self.deadline:
                    raise BrowserError(f"Chromium did not answer within the time limit while {doing}")
                return None
            ready, _, _ = select.select([self.from_browser], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise BrowserError(self._died(doing))
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Sends a command and returns its result; events seen meanwhile are kept."""
        want = self.send(method, params, session)
        while True:
            msg = self._read_one(self.deadline, method)
            assert msg is not None
            if msg.get("id") == want:
                if "error" in msg:
                    raise BrowserError(f"{method} failed: {msg['error'].get('message', msg['error'])}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method: str, session: str, until: float) -> bool:
        """Waits for an event (kept in `events` too) until `until`."""
        if any(e["method"] == method and e.get("sessionId") == session for e in self.events):
            return True
        while True:
            msg = self._read_one(until, f"waiting for {method}")
            if msg is None:
                return False
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method and msg.get("sessionId") == session:
                    return True

    def drain(self, quiet: float) -> None:
        """Keeps the events that arrive until `quiet` seconds pass without one."""
        while True:
            msg = self._read_one(time.monotonic() + quiet, "collecting events")
            if msg is None:
                return
            if "method" in msg:
                self.events.append(msg)

    def close(self) -> None:
        """Closes the browser, killing its process group, and removes the profile."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close")
                    self.proc.wait(timeout=3)
                except (BrowserError, OSError, subprocess.TimeoutExpired):
                    pass
        finally:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for fd in (self.to_browser, self.from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)


def console_text(args: list[dict]) -> str:
    parts = []
    for a in args:
        if "value" in a:
            v = a["value"]
            parts.append(v if isinstance(v, str) else json.dumps(v))
        else:
            parts.append(a.get("description") or a.get("unserializableValue") or a.get("type", "?"))
    return " ".join(parts)


def event_failures(events: list[dict], session: str) -> list[dict]:
    """Console errors, exceptions, error log entries and non-local requests."""
    out: list[dict] = []
    seen_urls: set[str] = set()

    def where(d: dict) -> str:
        url = d.get("url") or ""
        line = d.get("lineNumber")
        if not url:
            return ""
        return f" ({url}:{line + 1})" if isinstance(line, int) else f" ({url})"

    for e in events:
        if e.get("sessionId") != session:
            continue
        m, p = e["method"], e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            frames = (p.get("stackTrace") or {}).get("callFrames") or [{}]
            out.append({
                "kind": "console",
                "message": f"console.{p['type']}: {console_text(p.get('args', []))}{where(frames[0])}",
            })
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            exc = d.get("exception") or {}
            text = exc.get("description") or d.get("text") or "exception"
            text = text.splitlines()[0] if text else text
            out.append({"kind": "exception", "message": f"uncaught exception: {text}{where(d)}"})
        elif m == "Log.entryAdded":
            entry = p.get("entry", {})
            if entry.get("level") == "error":
                out.append({
                    "kind": "log",
                    "message": f"{entry.get('source', 'browser')} error: {entry.get('text', '')}{where(entry)}",
                })
        elif m in ("Network.requestWillBeSent", "Fetch.requestPaused"):
            url = p.get("request", {}).get("url", "")
            scheme = url.split(":", 1)[0].lower()
            if scheme not in ALLOWED_SCHEMES and url not in seen_urls:
                seen_urls.add(url)
                out.append({
                    "kind": "network",
                    "message": f"request to {url} (scheme {scheme}:): the report must be self-contained",
                })
    return out


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check(
    page: Path, shot: Path, width: int, height: int, media: str, timeout: float, expect_svg: bool
) -> dict:
    binary, _ = find_chromium()
    deadline = time.monotonic() + timeout
    url = page.resolve().as_uri()
    browser = Browser(binary, width, height, deadline)
    try:
        product = browser.call("Browser.getVersion").get("product", "")
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.call(f"{domain}.enable", {}, session)
        browser.call("Network.setBlockedURLs", {"urls": BLOCKED_PATTERNS}, session)
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        browser.call("Emulation.setEmulatedMedia", {"media": media}, session)
        failures: list[dict] = []
        nav = browser.call("Page.navigate", {"url": url}, session)
        if nav.get("errorText"):
            failures.append({"kind": "load", "message": f"cannot open {url}: {nav['errorText']}"})
        # Leave a third of the time for the checks and the screenshot.
        waited = max(1.0, (deadline - time.monotonic()) * 2 / 3)
        if not nav.get("errorText") and not browser.wait_event(
            "Page.loadEventFired", session, time.monotonic() + waited
        ):
            failures.append({"kind": "load", "message": f"the page did not finish loading within {waited:.0f} s"})
        # Fonts and two frames, so layout and the SVGs are final.
        browser.call(
            "Runtime.evaluate",
            {
                "expression": "document.fonts.ready.then(() => new Promise(r => "
                "requestAnimationFrame(() => requestAnimationFrame(() => r(true)))))",
                "awaitPromise": True,
            },
            session,
        )
        res = browser.call(
            "Runtime.evaluate", {"expression": PAGE_CHECKS, "returnByValue": True}, session
        )
        if "exceptionDetails" in res:
            raise BrowserError(f"the page checks did not run: {res['exceptionDetails'].get('text')}")
        probe = res["result"]["value"]
        metrics = browser.call("Page.getLayoutMetrics", {}, session)
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        page_w = max(width, int(size["width"] + 0.999))
        page_h = max(height, int(size["height"] + 0.999))
        png = browser.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": page_w, "height": page_h, "scale": 1},
            },
            session,
        )["data"]
        write_atomic(shot, base64.b64decode(png))
        browser.drain(0.2)
        failures += event_failures(browser.events, session)
    finally:
        browser.close()

    svgs = probe["svgs"]
    for i, s in enumerate(svgs):
        if s["width"] <= 0 or s["height"] <= 0:
            failures.append({
                "kind": "svg",
                "message": f"svg {i + 1} of {len(svgs)} did not render: "
                f"{s['width']:g} x {s['height']:g} px: {s['label']}",
            })
    if expect_svg and not svgs:
        failures.append({"kind": "svg", "message": "no <svg> element on the page (--expect-svg)"})
    for o in probe["overflow"]:
        failures.append({
            "kind": "overflow",
            "message": f"content {o['content']} px wide in a {o['box']} px box: {o['label']}",
        })
    if probe["page_width"] > probe["viewport_width"] + 1:
        failures.append({
            "kind": "overflow",
            "message": f"the page is {probe['page_width']} px wide in a {probe['viewport_width']} px viewport",
        })
    return {
        "ok": not failures,
        "url": url,
        "browser": product,
        "failures": failures,
        "svg_count": len(svgs),
        "svgs": svgs,
        "screenshot": str(shot),
        "page": {"width": page_w, "height": page_h},
        "viewport": {"width": width, "height": height},
        "media": media,
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="browser_check.py",
        description="Open an HTML report in headless Chromium; fail on console errors, "
        "non-local requests, unrendered SVGs and overflowing text; keep a screenshot.",
    )
    ap.add_argument("page", type=Path, help="the HTML file")
    ap.add_argument("--screenshot", type=Path, required=True, help="where to write the full-page PNG")
    ap.add_argument("--width", type=int, default=1280, help="viewport width in CSS px (1280)")
    ap.add_argument("--height", type=int, default=800, help="viewport height in CSS px (800)")
    ap.add_argument("--media", choices=("screen", "print"), default="screen", help="CSS media (screen)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds for the whole run (30)")
    ap.add_argument("--expect-svg", action="store_true", help="fail when the page has no <svg>")
    ap.add_argument("--json", action="store_true", help="print a JSON summary instead of text")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    if not a.page.is_file():
        print(f"error: no such file: {a.page}", file=sys.stderr)
        return 2
    if a.width < 100 or a.height < 100 or a.timeout <= 0:
        print("error: --width/--height must be at least 100 and --timeout positive", file=sys.stderr)
        return 2

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        r = check(a.page, a.screenshot, a.width, a.height, a.media, a.timeout, a.expect_svg)
    except BrowserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(r, indent=2))
    else:
        for f in r["failures"]:
            print(f"{f['kind']}: {f['message']}")
        state = "ok" if r["ok"] else f"FAILED ({len(r['failures'])} problems)"
        print(
            f"{state}: {a.page} at {a.width}x{a.height} ({a.media}): {r['svg_count']} SVGs; "
            f"page {r['page']['width']}x{r['page']['height']}; screenshot {r['screenshot']}"
        )
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
