"""Running `strandline console` as users do (a subprocess) and reading what it prints."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

# The line the command prints once it listens; it carries the port when --port 0.
LISTENING = re.compile(r"Strandline console on (http://\S+/)")


def run_console(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """A console invocation expected to exit by itself (the error paths)."""
    return subprocess.run(
        [sys.executable, "-m", "strandline", "console", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "COLUMNS": "250", "NO_COLOR": "1"},
    )


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, f"exited {done.returncode}: {done.stdout}{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error:"), lines[0]
    return lines[0]


@contextmanager
def console_process(*args: str, startup_timeout_s: float = 45.0) -> Iterator[str]:
    """A console serving on a free port for the duration of the block; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "strandline", "console", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    output: list[str] = []

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        url = None
        deadline = time.monotonic() + startup_timeout_s
        while url is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                if process.poll() is not None:
                    break
                continue
            found = LISTENING.search(line)
            url = found.group(1) if found else None
        assert url is not None, f"the console did not start: {''.join(output)}"
        with urllib.request.urlopen(url + "healthz", timeout=10) as answer:
            assert answer.status == 200
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if output:
            print("--- console output ---\n" + "".join(output))
