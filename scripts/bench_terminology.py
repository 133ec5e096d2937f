#!/usr/bin/env python3
"""Terminology and alignment figures of one checkpoint on a parallel test set.

Constraints are made as the literature evaluates them: for every line, the longest reference
word of at least 5 letters that the unconstrained beam missed (none when it missed none). Prints
the share of constraints that appear as whole words, BLEU with and without them, the time
ratio (same run, best of --repeat), whether lines without constraints are unchanged, whether
--avoid kept the avoided words out, and the alignment proxy (hypothesis words that occur in
their source line: the share whose hard alignment points at that word).

  scripts/bench_terminology.py --checkpoint RUN --src test.en --ref test.de [--work DIR]
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

WORD = re.compile(r"\w[\w'-]*\w|\w", re.UNICODE)


def words(line):
    return WORD.findall(line)


def letters(word):
    return sum(c.isalpha() for c in word)


def translate(args, out, *extra):
    """Runs nmt translate; returns the seconds it reported."""
    cmd = [args.nmt, "translate", "--checkpoint", *args.checkpoint, "--input", args.src,
           "--output", out, "--threads", str(args.threads), "--beam", str(args.beam), *extra]
    log = subprocess.run(cmd, check=True, stderr=subprocess.PIPE, text=True).stderr
    m = re.search(r"translated \d+ lines in ([0-9.]+) s", log)
    warnings = [l for l in log.splitlines() if "[warning]" in l]
    return float(m.group(1)), warnings


def best_time(args, out, *extra):
    times = []
    for _ in range(args.repeat):
        t, warnings = translate(args, out, *extra)
        times.append(t)
    return min(times), warnings


def bleu(args, hyp):
    r = subprocess.run([args.nmt, "eval", "--hyp", hyp, "--ref", args.ref, "--json"], check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return json.loads(r.stdout)["bleu"]


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def make_terms(hyps, refs):
    """(constraints, avoid): the longest missed reference word; the longest output word."""
    cons, avoid = [], []
    for h, r in zip(hyps, refs):
        have = set(words(h))
        missed = [w for w in words(r) if letters(w) >= 5 and w not in have]
        cons.append(max(missed, key=len) if missed else "")
        own = [w for w in words(h) if letters(w) >= 5]
        avoid.append(max(own, key=len) if own else "")
    return cons, avoid


def alignment_proxy(src_lines, out_lines, counts=None, surplus=None):
    """Well-formed lines, and hits/total of hypothesis words found in their source line.

    `counts` (a Counter) gets how often each such word was counted; `surplus` (a list) gets, per
    line, the copies of such words beyond their count in the source line: those translate other
    source words ("wearing" -> "in einem Hemd"), so a correct link points elsewhere."""
    bad = hits = total = 0
    for s, line in zip(src_lines, out_lines):
        hyp, _, pairs = line.rpartition(" ||| ")
        sw, tw = s.split(), hyp.split()
        links = {}
        try:
            for p in pairs.split():
                i, j = map(int, p.split("-"))
                if not (0 <= i < len(sw) and 0 <= j < len(tw)):
                    raise ValueError(p)
                links.setdefault(j, set()).add(i)
        except ValueError:
            bad += 1
            continue
        if len(links) != len(tw):
            bad += 1
        for j, w in enumerate(tw):
            if w in sw:
                total += 1
                hits += any(sw[i] == w for i in links.get(j, ()))
                if counts is not None:
                    counts[w] += 1
        if surplus is not None:
            surplus.append(sum(max(0, tw.count(w) - sw.count(w)) for w in set(tw) if w in sw))
    return bad, hits, total


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nmt", default="build/nmt")
    p.add_argument("--checkpoint", action="append", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--work", default="/tmp/bench_terminology")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda name: os.path.join(args.work, name)
    refs, srcs = read(args.ref), read(args.src)

    t_plain, _ = best_time(args, w("plain.hyp"))
    plain = read(w("plain.hyp"))
    cons, avoid = make_terms(plain, refs)
    with open(w("constraints.txt"), "w", encoding="utf-8") as f:
        f.write("".join(c + "\n" for c in cons))
    with open(w("avoid.txt"), "w", encoding="utf-8") as f:
        f.write("".join(a + "\n" for a in avoid))
    t_cons, warnings = best_time(args, w("constrained.hyp"), "--constraints", w("constraints.txt"))
    constrained = read(w("constrained.hyp"))
    n_cons = sum(1 for c in cons if c)
    met = sum(1 for c, h in zip(cons, constrained) if c and c in words(h))
    same = sum(1 for c, a, b in zip(cons, plain, constrained) if not c and a == b)
    free = sum(1 for c in cons if not c)
    translate(args, w("avoided.hyp"), "--avoid", w("avoid.txt"))
    avoided = read(w("avoided.hyp"))
    leaks = sum(1 for a, h in zip(avoid, avoided) if a and a in words(h))
    translate(args, w("aligned.hyp"), "--alignment")
    counts, surplus = collections.Counter(), []
    bad, hits, total = alignment_proxy(srcs, read(w("aligned.hyp")), counts, surplus)

    b_plain, b_cons = bleu(args, w("plain.hyp")), bleu(args, w("constrained.hyp"))
    print(f"lines: {len(plain)}; constrained: {n_cons}; dropped with a warning: {len(warnings)}")
    print(f"constraints met as whole words: {met}/{n_cons} = {100 * met / max(n_cons, 1):.2f}%")
    print(f"BLEU: unconstrained {b_plain:.2f}, constrained {b_cons:.2f} "
          f"({b_cons - b_plain:+.2f})")
    print(f"time (best of {args.repeat}): unconstrained {t_plain:.2f} s, constrained "
          f"{t_cons:.2f} s, ratio {t_cons / t_plain:.2f}x")
    print(f"lines without constraints unchanged: {same}/{free}")
    print(f"--avoid: avoided words that appeared: {leaks} of {sum(1 for a in avoid if a)} lines")
    print(f"--alignment: malformed lines {bad}/{len(plain)}; copied words aligned to their "
          f"source word: {hits}/{total} = {100 * hits / max(total, 1):.1f}%")
    print("  copied words: " + ", ".join(f"{k} {v}" for k, v in counts.most_common(5)) +
          f"; copies beyond the source line's count (they translate other words): "
          f"{sum(surplus)}, so correct links reach at most "
          f"{100 * (total - sum(surplus)) / max(total, 1):.1f}%")


if __name__ == "__main__":
    sys.exit(main())
