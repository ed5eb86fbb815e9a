#!/usr/bin/env bash
# tools/measure-graft.sh: Graft (issue 15) end to end on the inflated pair, for a quiet machine.
# ~10 minutes on 2 quiet Zen 5 cores (plain ~56 tok/s); on a loaded machine it takes longer.
#
# What it runs
#  1. goose bench, one process, tinystories prompts, greedy, every config interleaved per prompt
#     (equality with plain decoding checked token by token): none, goose, draft, draft-tree,
#     draft-tree+prune, graft, graft+paper at budgets 8, 16, 32 and auto. Prints tokens/s
#     (decode phase) per method and budget with the ratio to plain, MAT, draft passes per cycle,
#     and writes the tokens/s-vs-budget table (results.md) and plot
#     (tokens_per_second_vs_budget.png) under $OUT/bench.
#  2. goose generate, one process per prompt as a user runs it (model load, prefill and the
#     learned cache included; the cache is private to this run and starts empty, the first
#     prompt of each method is a warm-up that is not counted): plain, goose --budget auto,
#     graft --budget auto. Prints decode tokens/s and whole-process tokens/s (wall clock).
#
# Usage: GOOSE=/path/to/build/goose tools/measure-graft.sh [OUT_DIR]
#   env: SHARED (../shared), PAIR (where the inflated pair is made once), THREADS (2),
#        N_PROMPTS (8), MAX_TOKENS (128)
set -euo pipefail
GOOSE=${GOOSE:-$(dirname "$0")/../build/goose}
SHARED=${SHARED:-$(dirname "$0")/../../shared}
OUT=${1:-/tmp/graft_measure}
PAIR=${PAIR:-/tmp/graft_pair}
THREADS=${THREADS:-2}
N=${N_PROMPTS:-8}
TOK=${MAX_TOKENS:-128}
mkdir -p "$OUT" "$PAIR"
[ -x "$GOOSE" ] || { echo "graft_measure: no goose binary at $GOOSE (set GOOSE=)" >&2; exit 1; }

# The inflated pair (issue 15): a 0.44B-cost target and a ~1/20-cost weaker drafter.
if [ ! -s "$PAIR/target.gguf" ]; then
  "$SHARED/tools/inflate_gguf.py" "$SHARED/models/stories260K.gguf" "$PAIR/target.gguf.tmp" \
      --shape small-0.5b --dtype q8_0 && mv "$PAIR/target.gguf.tmp" "$PAIR/target.gguf"
fi
if [ ! -s "$PAIR/draft.gguf" ]; then
  "$SHARED/tools/inflate_gguf.py" "$SHARED/models/stories260K.gguf" "$PAIR/draft.gguf.tmp" \
      --shape draft-45m --drop-layers 3 && mv "$PAIR/draft.gguf.tmp" "$PAIR/draft.gguf"
fi
T="$PAIR/target.gguf"
D="$PAIR/draft.gguf"
# A private cache: the cost curve is measured once here (and reused by part 2), and no learned
# state from earlier runs leaks in.
export XDG_CACHE_HOME="$OUT/cache"
rm -rf "$XDG_CACHE_HOME"
start=$(date +%s)

echo "== 1. goose bench: tokens/s by method and budget ($N tinystories prompts, $TOK tokens, -t $THREADS)"
"$GOOSE" bench -m "$T" -md "$D" --data tinystories --n-prompts "$N" --max-tokens "$TOK" \
    --methods goose,draft,draft-tree,draft-tree+prune,graft,graft+paper \
    --budgets 8,16,32,auto -t "$THREADS" --out "$OUT/bench" --quiet
python3 - "$OUT/bench/results.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
rows = [r for r in j["summary"] if r["dataset"] == "all"]
plain = next(r["tokens_per_second"] for r in rows if r["method"] == "none")
budgets = ["8", "16", "32", "auto"]
print(f"equality: {j['equality']}")
print(f"plain: {plain:.1f} tok/s")
print(f"{'method':18s}" + "".join(f"{b:>16s}" for b in budgets) + "   (tok/s, x plain)")
by = {}
for r in rows:
    by.setdefault(r["variant"], {})[r["budget"]] = r
for v, rs in by.items():
    if v == "none":
        continue
    cells = []
    for b in budgets:
        r = rs.get(b)
        cells.append(f"{r['tokens_per_second']:7.1f} {r['tokens_per_second'] / plain:5.2f}x"
                     if r else f"{'-':>13s}")
    print(f"{v:18s}" + "".join(f"{c:>16s}" for c in cells))
print()
print(f"{'config':24s}{'MAT':>7s}{'draft passes/cycle':>20s}{'tok/s':>8s}")
for v, rs in by.items():
    for b in budgets + ["default"]:
        r = rs.get(b)
        if not r:
            continue
        dm = r["stats"].get("draft_model") or {}
        passes = dm.get("passes_per_cycle")
        print(f"{r['config']:24s}{r['mean_accepted_tokens']:7.3f}"
              f"{(f'{passes:.2f}' if passes is not None else '-'):>20s}{r['tokens_per_second']:8.1f}")
g = by.get("graft", {}).get("auto"); gs = by.get("goose", {}).get("auto")
if g and gs:
    print(f"\ngraft@auto: {g['tokens_per_second'] / plain:.2f}x plain, "
          f"{g['tokens_per_second'] / gs['tokens_per_second']:.2f}x goose@auto")
EOF
echo "table: $OUT/bench/results.md   plot: $OUT/bench/tokens_per_second_vs_budget.png"
echo "bench took $(( $(date +%s) - start )) s"

echo
echo "== 2. goose generate, one process per prompt (prompts 11-14 of tinystories; 1 warm-up each)"
python3 - "$SHARED/data/tinystories/validation.jsonl" "$OUT/prompts" <<'EOF'
import json, os, sys
os.makedirs(sys.argv[2], exist_ok=True)
lines = open(sys.argv[1]).read().splitlines()
for i in range(10, 15):  # the bench uses the first prompts; these are others
    text = json.loads(lines[i])["text"]
    words = text.split()
    open(os.path.join(sys.argv[2], f"p{i}.txt"), "w").write(" ".join(words[:40]))
EOF
run() {  # method-args... ; prints decode tok/s and wall tok/s over prompts 11..14
  local label=$1; shift
  local dec=0 toks=0 wall=0
  "$GOOSE" generate -m "$T" -f "$OUT/prompts/p10.txt" -n "$TOK" --ignore-eos -t "$THREADS" \
      --json "$@" >/dev/null  # warm-up: cost curve, learned cache
  for i in 11 12 13 14; do
    local t0 t1
    t0=$(date +%s.%N)
    "$GOOSE" generate -m "$T" -f "$OUT/prompts/p$i.txt" -n "$TOK" --ignore-eos -t "$THREADS" \
        --json "$@" >"$OUT/gen.json"
    t1=$(date +%s.%N)
    read -r d n < <(python3 -c "import json; s=json.load(open('$OUT/gen.json'))['stats']; \
print(s['tokens_per_second'], len(json.load(open('$OUT/gen.json'))['tokens']))")
    dec=$(python3 -c "print($dec + $d)"); toks=$((toks + n))
    wall=$(python3 -c "print($wall + $t1 - $t0)")
  done
  local d_mean w_rate
  d_mean=$(python3 -c "print($dec / 4)"); w_rate=$(python3 -c "print($toks / $wall)")
  [ -n "${PLAIN_DEC:-}" ] || { PLAIN_DEC=$d_mean; PLAIN_WALL=$w_rate; }
  python3 -c "print(f'{\"$label\":26s} decode {$d_mean:6.1f} tok/s ({$d_mean / $PLAIN_DEC:.2f}x)   \
whole process {$w_rate:6.1f} tok/s ({$w_rate / $PLAIN_WALL:.2f}x)')"
}
run "plain" --spec none
run "goose --budget auto" --spec goose --budget auto
run "graft --budget auto" -md "$D" --spec graft --budget auto
run "graft+paper --budget auto" -md "$D" --spec graft+paper --budget auto
echo "total $(( $(date +%s) - start )) s"
