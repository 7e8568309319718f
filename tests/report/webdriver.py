"""A tiny W3C WebDriver client for the system chromedriver + chromium (no selenium needed).

chromedriver listens on loopback only, on a port it picks itself (``--port=0``), so
parallel test runs never collide. Browser console messages come from chromedriver's
``goog:loggingPrefs`` log endpoint.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

CHROME_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=1280,1600",  # issue 16: readable at 1280 px
]


def available() -> bool:
    return os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)


class Browser:
    """Headless chromium driven over WebDriver; always use as a context manager."""

    def __init__(self, profile_dir: Path) -> None:
        self._profile = profile_dir
        self._proc: subprocess.Popen[str] | None = None
        self._base = ""
        self._session = ""

    def __enter__(self) -> Browser:
        self._proc = subprocess.Popen(
            [CHROMEDRIVER, "--port=0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        port = None
        while port is None and time.monotonic() < deadline:
            line = self._proc.stdout.readline()
            if not line:
                break
            match = re.search(r"started successfully on port (\d+)", line)
            port = int(match.group(1)) if match else None
        if port is None:
            self._stop()
            raise RuntimeError("chromedriver did not start")
        self._base = f"http://127.0.0.1:{port}"
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": CHROMIUM,
                        "args": [*CHROME_ARGS, f"--user-data-dir={self._profile}"],
                    },
                    "goog:loggingPrefs": {"browser": "ALL"},
                }
            }
        }
        try:
            self._session = self._call("POST", "/session", caps)["sessionId"]
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._session:
                self._call("DELETE", f"/session/{self._session}")
        finally:
            self._stop()

    def _stop(self) -> None:
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGTERM)  # chromedriver and the chromium it spawned
        except ProcessLookupError:
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout=10)
        self._proc.stdout.close()
        self._proc = None

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self._base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read().decode())["value"]

    def get(self, url: str) -> None:
        self._call("POST", f"/session/{self._session}/url", {"url": url})

    def execute(self, script: str, *args: Any) -> Any:
        return self._call("POST", f"/session/{self._session}/execute/sync", {"script": script, "args": list(args)})

    def console(self) -> list[dict[str, Any]]:
        """Browser console entries since the last call: [{'level': 'SEVERE', 'message': ...}, ...]."""
        return self._call("POST", f"/session/{self._session}/se/log", {"type": "browser"})

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self._call("GET", f"/session/{self._session}/screenshot")))
