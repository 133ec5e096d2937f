#!/usr/bin/env python3
"""Generate a small deterministic English->German "number words" corpus.

Each line of DIR/{train,valid,test}.en is an integer in [0, max] written out in
English words; the matching line of the .de file is the same integer written
out in German (one word, as on a cheque).  The three splits use disjoint
numbers.  Output is byte-identical for identical arguments.

Standard library only.  Usage:
    make_quickstart_data.py [--out DIR] [--seed N] [--max N]
                            [--train N] [--valid N] [--test N]
    make_quickstart_data.py --self-test
"""

import argparse
import os
import random
import sys

LIMIT = 999999  # largest number the converters support

# ---------------------------------------------------------------- English --

_EN_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven",
            "eight", "nine", "ten", "eleven", "twelve", "thirteen",
            "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
            "nineteen"]
_EN_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy",
            "eighty", "ninety"]


def _en_below_1000(n):
    """Words for 1 <= n <= 999 (list of tokens)."""
    words = []
    hundreds, rest = divmod(n, 100)
    if hundreds:
        words += [_EN_ONES[hundreds], "hundred"]
    if rest:
        if rest < 20:
            words.append(_EN_ONES[rest])
        else:
            tens, ones = divmod(rest, 10)
            words.append(_EN_TENS[tens] + ("-" + _EN_ONES[ones] if ones else ""))
    return words


def english(n):
    """American English number words, lowercase, no "and"."""
    if not isinstance(n, int) or n < 0 or n > LIMIT:
        raise ValueError("english(): number out of range: %r" % (n,))
    if n == 0:
        return "zero"
    thousands, rest = divmod(n, 1000)
    words = []
    if thousands:
        words += _en_below_1000(thousands) + ["thousand"]
    if rest:
        words += _en_below_1000(rest)
    return " ".join(words)


# ----------------------------------------------------------------- German --

_DE_ONES = ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben",
            "acht", "neun", "zehn", "elf", "zwölf", "dreizehn", "vierzehn",
            "fünfzehn", "sechzehn", "siebzehn", "achtzehn", "neunzehn"]
_DE_TENS = ["", "", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig",
            "siebzig", "achtzig", "neunzig"]


def _de_unit_prefix(d):
    """Form of 1..9 used before "hundert", "tausend" or "und"."""
    return "ein" if d == 1 else _DE_ONES[d]


def _de_below_100(n, final):
    """1 <= n <= 99; `final` means nothing follows (so 1 is "eins")."""
    if n == 1:
        return "eins" if final else "ein"
    if n < 20:
        return _DE_ONES[n]
    tens, ones = divmod(n, 10)
    return (_de_unit_prefix(ones) + "und" if ones else "") + _DE_TENS[tens]


def _de_below_1000(n, final):
    """1 <= n <= 999."""
    hundreds, rest = divmod(n, 100)
    s = ""
    if hundreds:
        s += _de_unit_prefix(hundreds) + "hundert"
    if rest:
        s += _de_below_100(rest, final)
    return s


def german(n):
    """German number words, lowercase, written as a single word."""
    if not isinstance(n, int) or n < 0 or n > LIMIT:
        raise ValueError("german(): number out of range: %r" % (n,))
    if n == 0:
        return "null"
    thousands, rest = divmod(n, 1000)
    s = ""
    if thousands:
        s += _de_below_1000(thousands, final=False) + "tausend"
    if rest:
        s += _de_below_1000(rest, final=True)
    return s


# -------------------------------------------------------------- self-test --

_EN_CASES = {
    0: "zero", 1: "one", 7: "seven", 10: "ten", 11: "eleven", 15: "fifteen",
    19: "nineteen", 20: "twenty", 21: "twenty-one", 42: "forty-two",
    99: "ninety-nine", 100: "one hundred", 101: "one hundred one",
    110: "one hundred ten", 342: "three hundred forty-two",
    1000: "one thousand", 1001: "one thousand one",
    1200: "one thousand two hundred",
    12345: "twelve thousand three hundred forty-five",
    21000: "twenty-one thousand",
    100001: "one hundred thousand one",
    101000: "one hundred one thousand",
    999999: "nine hundred ninety-nine thousand nine hundred ninety-nine",
}

_DE_CASES = {
    0: "null", 1: "eins", 2: "zwei", 6: "sechs", 7: "sieben", 10: "zehn",
    11: "elf", 12: "zwölf", 16: "sechzehn", 17: "siebzehn", 20: "zwanzig",
    21: "einundzwanzig", 30: "dreißig", 31: "einunddreißig",
    42: "zweiundvierzig", 60: "sechzig", 70: "siebzig", 77: "siebenundsiebzig",
    99: "neunundneunzig", 100: "einhundert", 101: "einhunderteins",
    111: "einhundertelf", 121: "einhunderteinundzwanzig",
    200: "zweihundert", 342: "dreihundertzweiundvierzig",
    1000: "eintausend", 1001: "eintausendeins",
    1200: "eintausendzweihundert", 2001: "zweitausendeins",
    12345: "zwölftausenddreihundertfünfundvierzig",
    21000: "einundzwanzigtausend", 31001: "einunddreißigtausendeins",
    100000: "einhunderttausend", 101000: "einhunderteintausend",
    101101: "einhunderteintausendeinhunderteins",
    999999: "neunhundertneunundneunzigtausendneunhundertneunundneunzig",
}


def self_test():
    for n, want in _EN_CASES.items():
        got = english(n)
        assert got == want, "english(%d) = %r, want %r" % (n, got, want)
    for n, want in _DE_CASES.items():
        got = german(n)
        assert got == want, "german(%d) = %r, want %r" % (n, got, want)
    # Structural checks over the whole range: distinct outputs, clean tokens.
    seen_en, seen_de = set(), set()
    for n in range(LIMIT + 1):
        e, d = english(n), german(n)
        assert e == e.strip() and "  " not in e and e.islower(), (n, e)
        assert " " not in d and d.islower(), (n, d)
        assert (d == "eins" or d.endswith("eins")) == (n % 100 == 1), (n, d)
        seen_en.add(e)
        seen_de.add(d)
    assert len(seen_en) == LIMIT + 1 and len(seen_de) == LIMIT + 1
    for bad in (-1, LIMIT + 1):
        for fn in (english, german):
            try:
                fn(bad)
            except ValueError:
                pass
            else:
                raise AssertionError("%s(%d) should fail" % (fn.__name__, bad))
    print("self-test passed (%d english, %d german examples, range 0..%d)"
          % (len(_EN_CASES), len(_DE_CASES), LIMIT))


# ------------------------------------------------------------- generation --

def sample_numbers(rng, max_n, count):
    """`count` distinct numbers in [0, max_n], in random order.

    The number of digits is drawn uniformly from 1..len(str(max_n)), then a
    uniform number with that many digits, so small numbers are well
    represented.  When most of the range is needed, falls back to a plain
    uniform sample without replacement (rejection would be too slow).
    """
    total = max_n + 1
    if count > total:
        raise ValueError("need %d distinct numbers but only %d exist in [0, %d]"
                         % (count, total, max_n))
    if 2 * count > total:
        return rng.sample(range(total), count)
    max_digits = len(str(max_n))
    seen = set()
    out = []
    while len(out) < count:
        d = rng.randint(1, max_digits)
        lo = 0 if d == 1 else 10 ** (d - 1)
        hi = min(10 ** d - 1, max_n)
        n = rng.randint(lo, hi)
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def write_split(out_dir, name, numbers):
    for lang, fn in (("en", english), ("de", german)):
        path = os.path.join(out_dir, "%s.%s" % (name, lang))
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            for n in numbers:
                f.write(fn(n) + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Generate a deterministic English->German number-words "
                    "corpus (train/valid/test with disjoint numbers).")
    p.add_argument("--out", default=os.path.join("data", "quickstart"),
                   help="output directory (default: data/quickstart)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--max", type=int, default=LIMIT,
                   help="largest number, at most %d (default %d)" % (LIMIT, LIMIT))
    p.add_argument("--train", type=int, default=30000, help="train lines (default 30000)")
    p.add_argument("--valid", type=int, default=500, help="valid lines (default 500)")
    p.add_argument("--test", type=int, default=1000, help="test lines (default 1000)")
    p.add_argument("--self-test", action="store_true",
                   help="check the converters against known examples and exit")
    args = p.parse_args(argv)

    if args.self_test:
        self_test()
        return 0

    if not 0 <= args.max <= LIMIT:
        p.error("--max must be between 0 and %d" % LIMIT)
    for name in ("train", "valid", "test"):
        if getattr(args, name) < 0:
            p.error("--%s must be >= 0" % name)
    total = args.train + args.valid + args.test
    if total > args.max + 1:
        p.error("train+valid+test = %d exceeds the %d numbers in [0, %d]"
                % (total, args.max + 1, args.max))

    rng = random.Random(args.seed)
    numbers = sample_numbers(rng, args.max, total)
    # Small numbers are exhausted early in the draw; shuffle so that every
    # split gets the same mix of magnitudes.
    rng.shuffle(numbers)
    splits = [("train", numbers[:args.train]),
              ("valid", numbers[args.train:args.train + args.valid]),
              ("test", numbers[args.train + args.valid:])]

    os.makedirs(args.out, exist_ok=True)
    for name, nums in splits:
        write_split(args.out, name, nums)
    print("wrote train=%d valid=%d test=%d lines (numbers 0..%d, seed %d) to %s"
          % (args.train, args.valid, args.test, args.max, args.seed, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
