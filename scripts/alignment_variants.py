#!/usr/bin/env python3
"""Hard-alignment rules compared on `nmt translate --alignment soft` output, by the proxy of
bench_terminology.py (hypothesis words that occur in their source line: the share whose link
points at that word), and the proxy's misses by the pair of words they link.

  for L in 0 1 2; do build/nmt translate --checkpoint RUN --input SRC --beam 5 \\
      --alignment soft --alignment-layer $L --output soft.$L.jsonl; done
  scripts/alignment_variants.py --src SRC soft.0.jsonl soft.1.jsonl soft.2.jsonl

The soft rows are word-level (mean over a source word's pieces, normalised over the source
words). Rules: "row" links each target word to its largest weight, "prod" to the largest
p(s|t) * p(t|s) (what --alignment does); a distance prior multiplies each weight by
exp(-lambda * |i/S - j/T|) as fast_align's diagonal does. Misses are listed for the second file
(the default layer of a 3-layer decoder) with "prod".
"""
import argparse
import collections
import json
import math


def hard(weights, rule, lam):
    T, S = len(weights), len(weights[0])
    column = [sum(weights[t][s] for t in range(T)) for s in range(S)]
    links = []
    for t in range(T):
        def score(s):
            w = weights[t][s]
            v = w if rule == "row" else (w * w / column[s] if column[s] > 0 else 0.0)
            return v * math.exp(-lam * abs((s + 0.5) / S - (t + 0.5) / T)) if lam else v
        links.append(max(range(S), key=lambda s: (score(s), -s)))
    return links


def proxy(sources, layers, combo, rule, lam, misses=None):
    hits = total = 0
    for n, src in enumerate(sources):
        objs = [layers[l][n] for l in combo]
        sw, tw = objs[0]["source"], objs[0]["target"]
        if sw != src.split():
            raise SystemExit(f"line {n + 1}: the soft output's source words differ from --src")
        if not sw or not tw:
            continue
        mean = [[sum(o["alignment"][t][s] for o in objs) / len(objs) for s in range(len(sw))]
                for t in range(len(tw))]
        links = hard(mean, rule, lam)
        for j, w in enumerate(tw):
            if w in sw:
                total += 1
                hits += sw[links[j]] == w
                if misses is not None and sw[links[j]] != w:
                    misses[(w, sw[links[j]].strip(".,").lower())] += 1
    return hits, total


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--src", required=True)
    p.add_argument("soft", nargs="+", help="one --alignment soft output per decoder layer")
    args = p.parse_args()
    with open(args.src, encoding="utf-8") as f:
        sources = f.read().split("\n")[:-1]
    layers = []
    for path in args.soft:
        with open(path, encoding="utf-8") as f:
            layers.append([json.loads(line) for line in f])
    n = len(layers)
    combos = [(l,) for l in range(n)] + ([tuple(range(1, n)), tuple(range(n))] if n > 2 else [])
    for combo in combos:
        for rule in ("row", "prod"):
            for lam in (0.0, 1.0, 3.0):
                h, t = proxy(sources, layers, combo, rule, lam)
                print(f"layers {'+'.join(map(str, combo))} {rule} lambda {lam:g}: "
                      f"{h}/{t} = {100 * h / max(t, 1):.1f}%")
    misses = collections.Counter()
    default = (min(1, n - 1),)
    h, t = proxy(sources, layers, default, "prod", 0.0, misses)
    print(f"misses of layer {default[0]} prod ({t - h}): " +
          ", ".join(f"{w}->{s} {c}" for (w, s), c in misses.most_common()))


if __name__ == "__main__":
    main()
