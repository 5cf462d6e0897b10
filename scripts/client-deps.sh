#!/usr/bin/env bash
# What the client and SDK tests need, installed once (idempotent, a few seconds
# when present): a Python venv in target/clients-venv with the pinned packages
# of clients/*/requirements.txt and the Python client (clients/python,
# editable), and the npm packages of clients/proxy-tests and clients/typescript
# (node and npm from Debian's packages: apt-get install nodejs npm). The tests
# that use them (tests/proxy.rs, the SDK checks) fail when they are missing and
# STRATA_REQUIRE_CLIENT_TESTS is set, which scripts/test.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/clients-venv
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p target
  python3 -m venv "$venv"
fi
stamp="$venv/.installed"
reqs=$(cat clients/*/requirements.txt | sort -u)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$reqs" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check $(cat clients/*/requirements.txt)
  echo "$reqs" > "$stamp"
fi
# the Python client itself, editable: its tests and examples/python_client.py import the checkout's code
"$venv/bin/python" -c "import strata_client" 2>/dev/null || "$venv/bin/pip" install -q --disable-pip-version-check -e ./clients/python
command -v npm >/dev/null || { echo "client-deps: npm is required (apt-get install nodejs npm)" >&2; exit 1; }
for d in proxy-tests typescript; do
  # npm ci when the lock file is newer than what node_modules holds
  if [ ! -f "clients/$d/node_modules/.package-lock.json" ] || [ "clients/$d/package-lock.json" -nt "clients/$d/node_modules/.package-lock.json" ]; then
    (cd "clients/$d" && npm ci --no-audit --no-fund --loglevel=error)
  fi
done
