#!/bin/bash
# The engine simulator's fingerprint, to show that a refactoring changed no
# run: per-seed trace hashes (every mode, and every engine mutant), each
# mutant's catch count and each campaign's summary.
#
#   scripts/sim-fingerprint.sh BINARY OUTDIR       # N=1000 seeds, M=100 per mutant
#   scripts/sim-fingerprint.sh --compare DIR_A DIR_B
#
# BINARY is a `simulation` binary built with --all-features (e.g. copied from
# $CARGO_TARGET_DIR/debug/simulation before and after the change).
set -u
if [ "${1:-}" = "--compare" ]; then
  A=$2; B=$3; ok=0; bad=0
  for f in $(cd "$A" && ls); do
    if cmp -s "$A/$f" "$B/$f"; then ok=$((ok+1)); else bad=$((bad+1)); echo "DIFFERS: $f"; fi
  done
  echo "identical files: $ok, differing: $bad"
  echo "trace hashes compared: $(cat "$A"/seed-*.txt "$A"/mutant-seed-*.txt | grep -c '^trace hash')"
  [ "$bad" = 0 ]
  exit
fi
BIN=$1; OUT=$2; mkdir -p "$OUT"
N=${N:-1000}; M=${M:-100}
hashes() { grep -E "^(violation|simulated|trace hash|violations)"; }
for mode in default drift-beyond-bound backend-clock-step backend-state-loss pauses lease-removed; do
  for s in $(seq 0 $((N-1))); do
    echo "== $mode $s"; "$BIN" --mode $mode --seed "$s" | hashes
  done > "$OUT/seed-$mode.txt"
done
for m in $("$BIN" --mutant list | grep -v client); do
  for s in $(seq 0 $((M-1))); do
    echo "== $m $s"; "$BIN" --mutant "$m" --seed "$s" | hashes
  done > "$OUT/mutant-seed-$m.txt"
  "$BIN" --mutant "$m" --seeds "$N" --count | grep -v "^speed:" > "$OUT/mutant-count-$m.txt"
done
for mode in default pauses lease-removed; do
  "$BIN" --mode $mode --seeds "$N" --client-seeds 0 | grep -v "^speed:" > "$OUT/summary-$mode.txt"
done
for mode in drift-beyond-bound backend-clock-step backend-state-loss; do
  "$BIN" --mode $mode --seeds "$N" --count | grep -v "^speed:" > "$OUT/summary-$mode.txt"
done
