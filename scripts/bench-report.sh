#!/usr/bin/env bash
# Runs the criterion benches (recall: inject / inject_cached / inject_keyword /
# memory_search at 1k, 10k and 100k episodes, promotion, record; graph: 2-hop
# search over 10k entities) in one run, then prints p50/p99 of every
# measurement and its ratio to the keyword-only inject at the same size,
# measured in the same run.
#
# Usage: scripts/bench-report.sh [criterion filter]
# Environment: STRATA_BENCH_SIZES=1000,10000 (episode counts; default 1k,10k,100k).
# Needs the model (scripts/fetch-model.sh). Output also kept in target/bench-report.log.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/fetch-model.sh >/dev/null
log=target/bench-report.log
mkdir -p target
cargo bench --profile dev --bench recall --bench graph -- "$@" 2>&1 | tee "$log" >/dev/null || {
  echo "bench-report: cargo bench failed; see $log" >&2
  tail -20 "$log" >&2
  exit 1
}
python3 - "$log" <<'PY'
import re, sys
rows = []
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    m = re.match(r"^([\w/]+): n=(\d+) p50=([\d.]+) ms p99=([\d.]+) ms", line.strip())
    if m:
        rows.append((m.group(1), int(m.group(2)), float(m.group(3)), float(m.group(4))))
if not rows:
    sys.exit("bench-report: no p50/p99 lines found in the bench output")
base = {}
for name, n, p50, p99 in rows:
    kind, _, size = name.partition("/")
    if kind == "inject_keyword":
        base[size] = (p50, p99)
print(f"{'measurement':<28} {'n':>6} {'p50 ms':>9} {'p99 ms':>9} {'p50 / keyword':>14} {'p99 / keyword':>14}")
for name, n, p50, p99 in rows:
    size = name.partition("/")[2]
    if size in base:
        r50, r99 = f"{p50 / base[size][0]:.2f}x", f"{p99 / base[size][1]:.2f}x"
    else:
        r50 = r99 = "-"
    print(f"{name:<28} {n:>6} {p50:>9.3f} {p99:>9.3f} {r50:>14} {r99:>14}")
print("\nratios: against inject_keyword (BM25 only, no embedding) at the same episode count, same run")
PY
