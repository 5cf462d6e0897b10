#!/usr/bin/env bash
# What the console's browser tests (tests/console.rs) need: headless Chromium and
# chromedriver from Debian's packages (chromium, chromium-driver), installed when
# missing (as root, with apt-get; a few seconds when present). The test fails
# without them when STRATA_REQUIRE_BROWSER_TESTS is set, which scripts/test.sh does.
set -euo pipefail
if command -v chromedriver >/dev/null && command -v chromium >/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "browser-deps: chromium and chromedriver are missing; run as root: apt-get install chromium chromium-driver" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
chromedriver --version
