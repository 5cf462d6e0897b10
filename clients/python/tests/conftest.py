"""A real `strata serve` for the client tests: the binary of this checkout
(``STRATA_BIN``, else ``target/debug/strata``) on a free loopback port over
a fresh data directory, with an admin key and an agent key for alice/bot
created first (so the server runs with keys, as in production)."""
import os
import pathlib
import socket
import subprocess
import tempfile
import time

import httpx
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


def binary() -> str:
    b = os.environ.get("STRATA_BIN") or str(ROOT / "target" / "debug" / "strata")
    if not os.path.exists(b):
        pytest.fail(f"{b} is missing: build it with `cargo build` (scripts/test.sh does)")
    return b


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *settings: str):
        self.dir = tempfile.TemporaryDirectory()
        self.data = os.path.join(self.dir.name, "data")
        base = [binary(), "--data-dir", self.data]
        for s in ("pruner.enabled=false",) + settings:
            base += ["--set", s]
        env = {k: v for k, v in os.environ.items() if k != "STRATA_LOG"}
        run = lambda *a: subprocess.run(base + list(a), env=env, check=True, capture_output=True, text=True).stdout.strip()
        self.admin_key = run("keys", "create", "--admin", "--label", "tests-admin")
        self.alice_key = run("keys", "create", "--user", "alice", "--agent", "bot", "--label", "alice")
        self.bob_key = run("keys", "create", "--user", "bob", "--agent", "bot", "--label", "bob")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(os.path.join(self.dir.name, "server.log"), "w")
        self.proc = subprocess.Popen(base + ["serve", "--listen", f"127.0.0.1:{port}"], env=env, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"strata serve did not start: {open(self.log.name).read()[-2000:]}")
            time.sleep(0.1)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        self.dir.cleanup()


@pytest.fixture(scope="session")
def server():
    s = Server()
    yield s
    s.stop()
