#!/usr/bin/env python3
"""tools/measure-e2e.py: end-to-end speed as users run goose (issue 14): one `goose generate`
process per prompt, plain decoding against GOOSE at --budget auto and at fixed budgets, on a
model that costs like a real one. For a quiet machine; ratios come from one run, every config
run on the same prompt back to back (so a noisy neighbour hits them all alike).

What it runs
  0. The model: `goose synth --inflate` of the bundled tiny model to --like (small-0.5b = a
     0.44B-cost model, llama-1b = 1.5B), made once under --work.
  1. Private caches under --work, fresh: the verify-cost curve is measured once; then each
     config gets a cache of its own ($XDG_CACHE_HOME), holding that curve, which --warmup
     tinystories prompts (not counted) run with that config fill, as a user's earlier runs
     would. One cache per config: a config run after another on the same prompt must not find
     the text it is about to write in a table the other just harvested.
  2. For each data set and prompt, one process per config: none, goose@auto, goose@4/8/16 (the
     table cache on: each run loads what its config's earlier runs learned and saves it back),
     and goose@auto with --no-table-cache (every process starts cold); with --draft, graft at
     --budget auto and 8, draft-tree+prune at 8 (issue 15's pair: --model target.gguf --draft
     draft.gguf). --repeat R runs each prompt's configs R times in rotated orders, every
     repeat from what each config had learned before the prompt: on a shared machine a
     config's speed moves 5-10% from one run to the next.
  3. Edits (issue 31): --data edits runs the first --n tinystories and --n spec_bench prompts,
     each with a prediction (goose generate --prediction) that is the model's own greedy output
     with one token in ten replaced by another token of the outputs (seeded); --data unrelated gives each the
     greedy output of another prompt instead. The configs ending in +pred pass it; the rest
     ignore it.
Prints per data set and overall: decode tokens/s (the decode phase, from --json) and whole-
process tokens/s (wall clock: load, prefill and decode), each as a ratio to plain decoding,
MAT, mean tree size and the draft share (draft-model methods: the part of the decode time spent
drafting, i.e. draft passes and tree building); whether every output equalled plain decoding's;
and how auto compares with the best fixed budget in hindsight.

Usage: tools/measure-e2e.py [--goose build/goose] [--like small-0.5b] [--data tinystories,...]
           [--n 6] [--repeat 1] [--tokens 128] [--warmup 6] [--threads 2] [--work /tmp/goose-e2e]
           [--json F] [--configs none,goose@auto,...] [--model F.gguf] [--draft D.gguf]
"""
import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared"))


def prompts(name, first, count):
    """`count` prompts of a data set from index `first` (the text a user would type)."""
    d = os.path.join(SHARED, "data", name)
    if name == "tinystories":
        rows = [json.loads(l)["text"] for l in open(os.path.join(d, "validation.jsonl"))]
        rows = [" ".join(t.split()[:40]) for t in rows]
    elif name in ("spec_bench", "mt_bench"):
        rows = [json.loads(l)["turns"][0] for l in open(os.path.join(d, "question.jsonl"))]
    elif name == "gsm8k":
        rows = [json.loads(l)["question"] for l in open(os.path.join(d, "test.jsonl"))]
    elif name == "humaneval":
        with gzip.open(os.path.join(d, "HumanEval.jsonl.gz"), "rt") as f:
            rows = [json.loads(l)["prompt"] for l in f]
    else:
        sys.exit(f"measure-e2e: unknown data set '{name}'")
    return rows[first:first + count]


def decode(a, model, ids):
    out = subprocess.run([a.goose, "tokenize", "-m", model, "--decode", ",".join(map(str, ids))],
                         capture_output=True, text=True, check=True)
    return out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout


def predictions(a, model, ds, texts, cache):
    """Per prompt: the file holding its prediction (edits, unrelated), else None."""
    if ds not in ("edits", "unrelated"):
        return [None] * len(texts)
    outs = [generate(a, model, t, "none", None, [], cache)["tokens"] for t in texts]
    rng = random.Random(31)
    words = sorted({t for toks in outs for t in toks})  # (a random id may be half a character)
    files = []
    for i, toks in enumerate(outs):
        if ds == "edits":
            toks = list(toks)
            for b in range(0, len(toks), 10):  # one token in ten, at a random place
                k = min(len(toks) - 1, b + rng.randrange(10))
                toks[k] = rng.choice([w for w in words if w != toks[k]])
        else:
            toks = outs[(i + 1) % len(outs)]
        path = os.path.join(a.work, f"prediction-{ds}-{i}.txt")
        with open(path, "w") as f:
            f.write(decode(a, model, toks))
        files.append(path)
    return files


def replace_dir(src, dst):
    """dst becomes a copy of src."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)


def generate(a, model, prompt, spec, budget, extra, cache, prediction=None):
    os.environ["XDG_CACHE_HOME"] = cache
    flag = {"-md": ["-md", a.draft], "PRED": ["--prediction", prediction] if prediction else []}
    extra = [x for f in extra for x in flag.get(f, [f])]
    cmd = [a.goose, "generate", "-m", model, "-p", prompt, "-n", str(a.tokens), "--ignore-eos",
           "-t", str(a.threads), "--json", "--spec", spec] + (["--budget", budget] if budget else [])
    t0 = time.monotonic()
    out = subprocess.run(cmd + extra, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if out.returncode != 0:
        sys.exit(f"measure-e2e: {' '.join(cmd)} failed: {out.stderr.strip()}")
    j = json.loads(out.stdout)
    s = j["stats"]
    return {"tokens": j["tokens"], "n": len(j["tokens"]), "decode_s": s["generation_seconds"],
            "wall_s": wall, "passes": s["forward_passes"], "nodes": s["mean_tree_nodes"],
            "draft_s": s.get("draft_model", {}).get("seconds", 0.0)}


CONFIGS = [  # label, spec, budget, extra flags
    ("none", "none", None, []),
    ("goose@auto", "goose", "auto", []),
    ("goose@4", "goose", "4", []),
    ("goose@8", "goose", "8", []),
    ("goose@16", "goose", "16", []),
    ("goose@auto cold", "goose", "auto", ["--no-table-cache"]),
    # With a prediction (the edits and unrelated data sets; elsewhere as without).
    ("goose@auto+pred", "goose", "auto", ["PRED"]),
    ("pld@auto+pred", "pld", "auto", ["PRED"]),
    # With --draft (a drafter of the same vocabulary, e.g. tools/measure-graft.sh's pair).
    ("graft@auto", "graft", "auto", ["-md"]),
    ("graft@8", "graft", "8", ["-md"]),
    ("draft-tree+prune@8", "draft-tree+prune", "8", ["-md"]),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--goose", default=os.path.join(HERE, "..", "build", "goose"))
    p.add_argument("--like", default="small-0.5b")
    p.add_argument("--data", default="tinystories,spec_bench")
    p.add_argument("--n", type=int, default=6)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--warmup", type=int, default=6)
    p.add_argument("--repeat", type=int, default=1,
                   help="run every prompt's configs this many times (the machine's speed drifts)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--work", default="/tmp/goose-e2e")
    p.add_argument("--json", help="write every run here")
    p.add_argument("--model", help="this GGUF instead of the inflated --like model")
    p.add_argument("--draft", help="the draft model of the graft configs")
    p.add_argument("--configs", default=",".join(c[0] for c in CONFIGS),
                   help="the configs to run (none always runs)")
    a = p.parse_args()
    wanted = set(a.configs.split(",")) | {"none"}
    unknown = wanted - {c[0] for c in CONFIGS}
    if unknown:
        sys.exit(f"measure-e2e: unknown configs {sorted(unknown)}")
    configs = [c for c in CONFIGS if c[0] in wanted]
    if any("-md" in c[3] for c in configs) and not a.draft:
        sys.exit("measure-e2e: the graft configs need --draft DRAFT.gguf")
    os.makedirs(a.work, exist_ok=True)
    model = a.model or os.path.join(a.work, f"stories260K-{a.like}-q8_0.gguf")
    if not os.path.exists(model):
        subprocess.run([a.goose, "synth", "--inflate", os.path.join(SHARED, "models",
                        "stories260K.gguf"), "--like", a.like, "-o", model], check=True)
    start = time.monotonic()
    caches = os.path.join(a.work, "caches")
    shutil.rmtree(caches, ignore_errors=True)
    warmup = prompts("tinystories", 100, a.warmup)  # not the measured ones
    generate(a, model, warmup[0], "goose", "auto", ["--no-table-cache"], f"{caches}/curve")
    cache_of = {}
    for label, spec, budget, extra in configs:
        cache_of[label] = f"{caches}/{label.replace(' ', '-')}"
        replace_dir(f"{caches}/curve", cache_of[label])
        for i, text in enumerate(warmup):
            print(f"\rwarm-up {label} {i + 1}/{a.warmup}   ", end="", file=sys.stderr, flush=True)
            generate(a, model, text, spec, budget, extra, cache_of[label])
    print(file=sys.stderr)

    runs = []  # (dataset, prompt index, label, result)
    sets = a.data.split(",")
    total = sum(2 if ds in ("edits", "unrelated") else 1 for ds in sets) * a.n * len(configs) * a.repeat
    for ds in sets:
        texts = (prompts("tinystories", 0, a.n) + prompts("spec_bench", 0, a.n)
                 if ds in ("edits", "unrelated") else prompts(ds, 0, a.n))
        preds = predictions(a, model, ds, texts, f"{caches}/curve")
        for i, text in enumerate(texts):
            # Repeats start from what each config had learned before the prompt (its text is
            # not yet in the table), in rotated orders (no config always runs after another).
            if a.repeat > 1:
                for label in cache_of:
                    replace_dir(cache_of[label], cache_of[label] + ".before")
            for rep in range(a.repeat):
                k = rep % len(configs)
                for label, spec, budget, extra in configs[k:] + configs[:k]:
                    if rep > 0:
                        replace_dir(cache_of[label] + ".before", cache_of[label])
                    r = generate(a, model, text, spec, budget, extra, cache_of[label], preds[i])
                    runs.append((ds, i, label, r))
                    print(f"\r{len(runs)}/{total} runs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)

    plain = {(ds, i): r["tokens"] for ds, i, label, r in runs if label == "none"}
    mismatches = sum(r["tokens"] != plain[(ds, i)] for ds, i, label, r in runs)
    print(f"model {os.path.basename(model)}, {a.n} prompts per data set x {a.repeat}, "
          f"{a.tokens} tokens, "
          f"-t {a.threads}, {len(runs)} processes in {time.monotonic() - start:.0f} s; "
          f"outputs equal to plain decoding: {len(runs) - mismatches}/{len(runs)}")
    summary = {}
    for ds in sets + ["all"]:
        rows = [x for x in runs if ds == "all" or x[0] == ds]
        agg = {}
        for _, _, label, r in rows:
            g = agg.setdefault(label, {"n": 0, "decode_s": 0, "wall_s": 0, "passes": 0,
                                       "nodes": 0, "runs": 0, "draft_s": 0})
            for k in ("n", "decode_s", "wall_s", "passes", "draft_s"):
                g[k] += r[k]
            g["nodes"] += r["nodes"] * r["passes"]
            g["runs"] += 1
        base = agg["none"]
        print(f"\n{ds}: plain {base['n'] / base['decode_s']:.1f} tok/s decode, "
              f"{base['n'] / base['wall_s']:.1f} tok/s whole process")
        print(f"  {'config':18s}{'decode x plain':>16s}{'process x plain':>17s}{'MAT':>7s}"
              f"{'tree':>7s}{'draft share':>13s}")
        summary[ds] = {}
        for label, *_ in configs:
            g = agg[label]
            dec = (g["n"] / g["decode_s"]) / (base["n"] / base["decode_s"])
            wall = (g["n"] / g["wall_s"]) / (base["n"] / base["wall_s"])
            # draft share: the part of the decode time spent drafting (draft-model methods)
            share = g["draft_s"] / g["decode_s"]
            summary[ds][label] = {"decode_speedup": dec, "process_speedup": wall,
                                  "mat": g["n"] / g["passes"], "tree": g["nodes"] / g["passes"],
                                  "draft_share": share}
            print(f"  {label:18s}{dec:15.2f}x{wall:16.2f}x{g['n'] / g['passes']:7.2f}"
                  f"{g['nodes'] / g['passes']:7.1f}{share:13.1%}")
        fixed = {l: v for l, v in summary[ds].items() if l in ("goose@4", "goose@8", "goose@16")}
        if fixed and "goose@auto" in summary[ds]:
            best = max(fixed, key=lambda l: fixed[l]["decode_speedup"])
            ratio = summary[ds]["goose@auto"]["decode_speedup"] / fixed[best]["decode_speedup"]
            print(f"  auto / best fixed budget ({best}): {ratio:.2f}")
        if "graft@auto" in summary[ds] and "goose@auto" in summary[ds]:
            ratio = (summary[ds]["graft@auto"]["decode_speedup"] /
                     summary[ds]["goose@auto"]["decode_speedup"])
            print(f"  graft@auto / goose@auto: {ratio:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": model, "summary": summary, "mismatches": mismatches,
                       "runs": [{"dataset": ds, "prompt": i, "config": label,
                                 **{k: v for k, v in r.items() if k != "tokens"}}
                                for ds, i, label, r in runs]}, f, indent=1)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
