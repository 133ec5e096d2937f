#!/usr/bin/python3
"""A synthetic parallel corpus of any size, for data and memory benchmarks.

    make_synthetic_corpus.py N OUT [--seed S]

Writes N aligned lines to OUT.src and OUT.tgt. Words are drawn from a Zipf law
(exponent 1.1) over 100,000 made-up words a side; sentence lengths follow WMT
news (1-100 words, mean about 25); a target sentence is a noisy word-for-word
rendering of its source (its words map to target words, one in five is
replaced, its length differs by up to two words). About one line in a thousand
is empty, one in a thousand is over-long (150-300 words) and one in two
thousand holds invalid UTF-8, on either side, so that every filter of
nmt prepare has work. The output is deterministic: the same N, seed and
numpy give the same bytes, and a corpus is a prefix of any larger one.

Needs numpy (Debian: python3-numpy, which python3-torch brings).
"""

import argparse
import sys

import numpy as np

VOCAB = 100_000
BLOCK = 100_000  # lines generated at a time, each block from its own seed
SYLLABLES = ("ka ri to mu sen la vor im be ta ne go sh ul fa de pi ro zu an "
             "er st ch el qu ix ob yn ha wo").split()


def make_words(side):
    """VOCAB distinct words of 1-4 syllables; the target side's have other endings."""
    rng = np.random.Generator(np.random.PCG64(1000 + side))
    words, seen = [], set()
    while len(words) < VOCAB:
        n = int(rng.integers(1, 5))
        w = "".join(SYLLABLES[i] for i in rng.integers(0, len(SYLLABLES), n))
        if side == 1:
            w += ("en", "ung", "t", "e", "")[int(rng.integers(0, 5))]
        if w not in seen:
            seen.add(w)
            words.append(w.encode())
    return words


def variants(words):
    """Object arrays of each word followed by a space and by a newline."""
    space = np.array([w + b" " for w in words], dtype=object)
    newline = np.array([w + b"\n" for w in words], dtype=object)
    return space, newline


def render(ids, lengths, space, newline, special):
    """One block of lines as bytes: ids hold every word, lengths each line's count."""
    out = space[ids]
    ends = np.cumsum(lengths) - 1
    out[ends[lengths > 0]] = newline[ids[ends[lengths > 0]]]
    parts = []
    start = 0
    for line, n in enumerate(lengths):
        if n == 0:
            parts.append(special.get(line, b"\n"))
            continue
        if line in special:
            parts.append(special[line])
        else:
            parts.append(b"".join(out[start:start + n]))
        start += n
    return b"".join(parts)


def block(index, lines, cdf, seed=0):
    # Seed 0 is the corpus as it always was; another seed gives other sentences of the same
    # words and lengths (held-out text).
    rng = np.random.Generator(np.random.PCG64([index, 7] if seed == 0 else [index, 7, seed]))
    src_len = np.clip(np.rint(rng.gamma(3.5, 7.3, lines)), 1, 100).astype(np.int64)
    tgt_len = np.clip(src_len + rng.integers(-2, 3, lines), 1, 100).astype(np.int64)
    kind = rng.random(lines)
    side = rng.integers(0, 2, lines)
    src_special, tgt_special = {}, {}
    long_lines = np.nonzero((kind >= 0.001) & (kind < 0.002))[0]
    for line in long_lines:
        n = int(rng.integers(150, 301))
        if side[line] == 0:
            src_len[line] = n
        else:
            tgt_len[line] = n
    empty = np.nonzero(kind < 0.001)[0]
    for line in empty:
        (src_len if side[line] == 0 else tgt_len)[line] = 0
    src_ids = np.searchsorted(cdf, rng.random(int(src_len.sum())))
    # The target: each source word's image, one in five replaced, the length adjusted.
    tgt_ids = np.empty(int(tgt_len.sum()), dtype=np.int64)
    s = t = 0
    mapped = (src_ids * 7919 + 13) % VOCAB
    for line in range(lines):
        m = int(tgt_len[line])
        k = min(m, int(src_len[line]))
        tgt_ids[t:t + k] = mapped[s:s + k]
        if m > k:
            tgt_ids[t + k:t + m] = np.searchsorted(cdf, rng.random(m - k))
        s += int(src_len[line])
        t += m
    swap = rng.random(tgt_ids.size) < 0.2
    tgt_ids[swap] = np.searchsorted(cdf, rng.random(int(swap.sum())))
    for line in np.nonzero((kind >= 0.002) & (kind < 0.0025))[0]:
        bad = b"caf\xc3 \xff\xfe ok\n"
        (src_special if side[line] == 0 else tgt_special)[int(line)] = bad
    return src_ids, src_len, src_special, tgt_ids, tgt_len, tgt_special


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("n", type=int, help="lines (pairs)")
    p.add_argument("out", help="output prefix: writes OUT.src and OUT.tgt")
    p.add_argument("--seed", type=int, default=0, help="0: the corpus; others: held-out text")
    args = p.parse_args()
    if args.n < 0:
        sys.exit("make_synthetic_corpus.py: N must be >= 0")
    ranks = np.arange(1, VOCAB + 1, dtype=np.float64)
    weights = ranks ** -1.1
    cdf = np.cumsum(weights) / weights.sum()
    cdf[-1] = 1.0
    src_space, src_newline = variants(make_words(0))
    tgt_space, tgt_newline = variants(make_words(1))
    with open(args.out + ".src", "wb") as src, open(args.out + ".tgt", "wb") as tgt:
        for index, first in enumerate(range(0, args.n, BLOCK)):
            lines = min(BLOCK, args.n - first)
            s_ids, s_len, s_sp, t_ids, t_len, t_sp = block(index, BLOCK, cdf, args.seed)
            # A block is always made whole, then cut: a corpus is a prefix of a larger one.
            s_ids = s_ids[:int(s_len[:lines].sum())]
            t_ids = t_ids[:int(t_len[:lines].sum())]
            src.write(render(s_ids, s_len[:lines], src_space, src_newline,
                             {k: v for k, v in s_sp.items() if k < lines}))
            tgt.write(render(t_ids, t_len[:lines], tgt_space, tgt_newline,
                             {k: v for k, v in t_sp.items() if k < lines}))


if __name__ == "__main__":
    main()
