"""Runs every block of README.md and of the guides in ``DOCS`` marked
``<!-- runnable -->`` as written,
against a real ``strata serve`` (the ``server`` fixture) and, for the
chatbot loop's model, a small OpenAI-compatible upstream served here that
echoes the last user message."""
import json
import os
import pathlib
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
# the guides whose runnable Python blocks use this client
DOCS = [pathlib.Path(__file__).resolve().parents[3] / "docs" / name for name in ("langgraph.md", "langchain.md")]


def runnable_blocks(text):
    return re.findall(r"<!-- runnable -->\s*```python\n(.*?)```", text, re.S)


class Upstream(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        last = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        out = json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": f"Noted: {last}"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def test_the_readme_has_runnable_blocks():
    assert len(runnable_blocks(README.read_text())) >= 2
    assert all(runnable_blocks(p.read_text()) for p in DOCS)


def test_every_runnable_block_runs_as_written(server, tmp_path):
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    env = dict(os.environ, STRATA_URL=server.url, STRATA_API_KEY=server.admin_key,
               OPENAI_BASE_URL=f"http://127.0.0.1:{upstream.server_port}/v1", OPENAI_API_KEY="sk-test")
    try:
        blocks = [b for p in [README, *DOCS] for b in runnable_blocks(p.read_text())]
        for n, block in enumerate(blocks):
            script = tmp_path / f"block{n}.py"
            script.write_text(block)
            stdin = "I moved to Lisbon in May and adopted a cat called Miso.\nMiso sleeps on the radiator.\n/quit\n"
            r = subprocess.run([sys.executable, str(script)], input=stdin, capture_output=True, text=True, env=env, timeout=120)
            assert r.returncode == 0, f"README block {n} failed:\n{block}\n{r.stderr}"
            if "input(" in block:
                # the loop answered, and the ended session was found again and expanded
                assert "Noted: I moved to Lisbon" in r.stdout, r.stdout
                assert "ep_" in r.stdout and "Miso" in r.stdout, r.stdout
            if "retrieve_pages" in block:
                assert "Bought a grinder" in r.stdout, r.stdout
            if "StrataRetriever" in block:
                assert "You said Miso" in r.stdout and "ep_" in r.stdout, r.stdout
            if "StrataStore" in block:
                # the second thread found what the first one stored
                assert "Miso sleeps on the radiator" in r.stdout, r.stdout
    finally:
        upstream.shutdown()
