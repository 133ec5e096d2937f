#!/usr/bin/env python3
"""Training throughput with subword sampling on against off, in the same run.

  scripts/bench_sampling.py [--config configs/multi30k_en_de.json] [--steps 200] [--repeat 3]
                            [--alpha 0.3] [--out /tmp/nmt-bench-sampling] [--nmt build/nmt]

Trains the config (Multi30k en->de by default) for --steps steps in three modes, --repeat times
each, interleaved (off, on, on-best, off, ...), with no validation and one checkpoint at the end:
  off      no sampling: the store's ids
  on       both sides sampled with --alpha (unigram)
  on-best  both sides sampled with alpha 100: the machinery of sampling (text re-encoded per
           batch) with draws that are almost always the best segmentation
and prints, per mode, the median over repeats of the steps per second after the first 20 steps
(every step is the same pairs in every mode), the target tokens per second, the seconds spent
building batches per step, and the ratio of each mode's steps/s to off's. The vocabulary is
trained once and the stores are prepared once (data.cache_dir) before the timed runs.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARM = 20  # steps left out of each measurement: start-up and the first batches


def sampling_flags(alpha):
    """Both sides sampled with alpha; None: sampling off (whatever the config says)."""
    out = []
    for side in ("src", "tgt"):
        out += ["--set", f"data.{side}_sampling.enabled={'false' if alpha is None else 'true'}"]
        if alpha is not None:
            out += ["--set", f"data.{side}_sampling.alpha={alpha}"]
    return out


def train(args, run_dir, extra, steps):
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [args.nmt, "train", "--config", args.config, "--run-dir", run_dir,
           "--set", f"train.max_steps={steps}", "--set", "train.max_time=0",
           "--set", "train.log_every=10", "--set", "train.valid_every=0",
           "--set", "data.valid_src=", "--set", "data.valid_tgt=",
           "--set", "train.save_every=100000", "--set", "train.average_last=0",
           "--set", "train.average_best=false",
           "--set", f"data.cache_dir={args.out}/cache"] + args.vocab + extra
    r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_sampling.py: {' '.join(cmd)} failed:\n{r.stdout[-3000:]}")
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    return [r for r in rows if "loss" in r]


def measure(rows):
    first = next(r for r in rows if r["step"] >= WARM)
    last = rows[-1]
    later = [r for r in rows if r["step"] > first["step"]]
    seconds = last["elapsed_s"] - first["elapsed_s"]
    steps = last["step"] - first["step"]
    return {"steps_per_s": steps / seconds,
            "tok_per_s": sum(r["tgt_tokens"] for r in later) / seconds,
            "data_s_per_step": sum(r["data_s"] for r in later) / steps}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/multi30k_en_de.json")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--alpha", type=float, default=0.3)
    p.add_argument("--out", default="/tmp/nmt-bench-sampling")
    p.add_argument("--nmt", default="build/nmt")
    args = p.parse_args()
    args.vocab = []
    os.makedirs(args.out, exist_ok=True)
    modes = {"off": sampling_flags(None), "on": sampling_flags(args.alpha),
             "on-best": sampling_flags(100)}
    # Untimed: the vocabulary, then both stores (with and without text).
    train(args, f"{args.out}/vocab", modes["off"], 1)
    args.vocab = ["--set", f"vocab.model={args.out}/vocab/spm.model"]
    train(args, f"{args.out}/warm", modes["on"], 1)
    train(args, f"{args.out}/warm", modes["off"], 1)
    results = {m: [] for m in modes}
    for rep in range(args.repeat):
        for mode, flags in modes.items():
            results[mode].append(measure(train(args, f"{args.out}/{mode}", flags, args.steps)))
            r = results[mode][-1]
            print(f"repeat {rep + 1} {mode:8s} {r['steps_per_s']:.3f} steps/s "
                  f"{r['tok_per_s']:.0f} tgt tok/s, batches {1000 * r['data_s_per_step']:.1f} "
                  "ms/step", flush=True)
    median = {m: {k: statistics.median(r[k] for r in results[m]) for k in results[m][0]}
              for m in modes}
    print(f"\n{args.config}, {args.steps} steps x {args.repeat}, alpha {args.alpha} (medians)")
    for mode in modes:
        m = median[mode]
        print(f"  {mode:8s} {m['steps_per_s']:.3f} steps/s  {m['tok_per_s']:.0f} tgt tok/s  "
              f"batches {1000 * m['data_s_per_step']:.1f} ms/step  "
              f"ratio {m['steps_per_s'] / median['off']['steps_per_s']:.3f}")


if __name__ == "__main__":
    main()
