#!/usr/bin/env python3
"""Alignment variants judged by where they put tags: one checkpoint translates SRC with one
content word of every line in <b>...</b> (bench_documents.py's choice: the longest word of 4
letters or more) through `translate --format html`, once per variant (--alignment-step predict
or consume, each decoder layer, with and without --reverse-checkpoint), and
scripts/tag_placement.py judges every output with one independent aligner it trains on TRAIN
plus the outputs' pairs. The translations are the same in every variant; only the tags move.
Prints one row per variant: right % of judged elements, exact %, and the verbatim check.

  scripts/sweep_alignment.py --checkpoint RUN [--reverse-checkpoint REV] --src val.en \\
      --train-src train.en --train-tgt train.de [--layers 3] [--work DIR]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_documents import tag_sentence  # noqa: E402


def variants(layers, reverse):
    out = []
    for rev in ([None, reverse] if reverse else [None]):
        for step in ("predict", "consume"):
            for layer in range(layers):
                out.append((step, layer, rev))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--reverse-checkpoint")
    p.add_argument("--src", required=True)
    p.add_argument("--train-src", required=True)
    p.add_argument("--train-tgt", required=True)
    p.add_argument("--layers", type=int, default=3, help="the model's decoder layers")
    p.add_argument("--nmt", default="build/nmt")
    p.add_argument("--work", default="runs/sweep_alignment")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    tagged = os.path.join(args.work, "tagged.html")
    with open(args.src, encoding="utf-8") as f, open(tagged, "w", encoding="utf-8") as out:
        out.write("".join(tag_sentence(line) + "\n" for line in f.read().splitlines()))
    outputs, names = [], []
    for step, layer, rev in variants(args.layers, args.reverse_checkpoint):
        name = f"{step}-layer{layer}" + ("-reverse" if rev else "")
        path = os.path.join(args.work, name + ".html")
        if not os.path.exists(path):  # resumable: a finished variant is not run again
            cmd = [args.nmt, "translate", "--checkpoint", args.checkpoint, "--input", tagged,
                   "--output", path + ".part", "--format", "html", "--beam", str(args.beam),
                   "--threads", str(args.threads), "--alignment-step", step,
                   "--alignment-layer", str(layer)]
            if rev:
                cmd += ["--reverse-checkpoint", rev]
            subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
            os.rename(path + ".part", path)
        outputs.append(path)
        names.append(name)
    judge = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          "tag_placement.py"),
             "--train-src", args.train_src, "--train-tgt", args.train_tgt, "--src", tagged,
             "--json", "--out", *outputs]
    rows = [json.loads(line) for line in
            subprocess.run(judge, check=True, capture_output=True, text=True).stdout.splitlines()]
    print(f"{'variant':28} {'right %':>8} {'exact %':>8} {'verbatim %':>10} {'counts':>8}")
    for name, r in zip(names, rows):
        print(f"{name:28} {r['right_pct_of_judged']:8.1f} {r['exact_pct_of_judged']:8.1f} "
              f"{r['verbatim_pct_tag_holds_word']:10.1f} "
              f"{'equal' if not r['lines_count_differs'] else 'DIFFER':>8}")


if __name__ == "__main__":
    main()
