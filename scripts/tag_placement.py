#!/usr/bin/env python3
"""Judges where `nmt translate --format html` put inline tags, by an independent word aligner.

The MT system carries tags over through its own attention; this judge instead trains a
fast_align-style aligner itself, on the training corpus plus the test pairs appended (as one uses
fast_align, so that the test words are in its tables), and asks whether each tag of the output
covers words the aligner links to the words the source tag covers.

Aligner (Dyer et al. 2013, fast_align -d -v with the tension fixed): IBM Model 2 whose alignment
prior is p(a_j = i) = p0 for the null word, else (1 - p0) * exp(-lambda * |j/m - i/n|) / Z
(1-based positions, m target and n source tokens), lambda = 4, p0 = 0.08; translation tables
start uniform and are re-estimated by EM with fast_align's variational Bayes update (alpha
0.01). As in fast_align, the last of the --iterations passes only reads off the Viterbi links.
It is trained in both directions; the two are symmetrized with grow-diag-final-and (atools -c).

Words: tags are stripped, entities decoded, and a word is a whitespace-separated token of the
text; a tag element covers each word it has a character of. For the aligner a word is lowercased
and its leading/trailing punctuation split off ("Hund." -> "hund" "."); the split-off punctuation
is aligned but its links are not used, so word links come only from the words' cores.

Per line, the k-th --tag element of the source is paired with the k-th of the output. S = source
words it covers, T = output words it covers, L = output words linked to any word of S.
  right     T and L share a word
  wrong     L is not empty and T shares none of it (also when T is empty: the tag lost its words)
  unjudged  L is empty (the aligner links nothing)
  exact     T == L
Source elements with no output counterpart are counted as "unpaired" and listed by line.
Verbatim check, independent of the aligner: elements covering a source word (3+ characters or a
digit; case-insensitive, punctuation stripped) that occurs exactly once in the output line; the
share whose T holds that word.

  scripts/tag_placement.py --train-src data/multi30k/train.en --train-tgt data/multi30k/train.de \\
      --src tagged.en.html --out translated.de.html [more.html ...] [--tag b] [--max-train N] \\
      [--sample 200 --sample-out hand.tsv] [--seed 1] [--json]

--sample writes that many random lines of the first --out (seeded) as TSV: line, src html, out html, the linked
words and verdict of each element (" | " between elements) and an empty "hand" column to fill.
"""
import argparse
import html
import json
import math
import random
import re
import sys
import time
import unicodedata

MARKUP = re.compile(r"<!--.*?-->|<(?:/?[A-Za-z][^>]*|[!?][^>]*)>", re.S)
TAG_NAME = re.compile(r"<\s*(/?)\s*([A-Za-z][A-Za-z0-9-]*)")
# Block boundaries separate words even when no space is written around them.
BLOCK = {"address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
         "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main",
         "nav", "ol", "p", "pre", "section", "table", "td", "th", "title", "tr", "ul"}
NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))
NULL = 0


# ---------------------------------------------------------------- HTML and words

def parse_html(line, tag):
    """Returns (words, elements): the whitespace words of the text without markup, and for each
    `tag` element in document order the set of indices of the words it covers."""
    chars, owners, stack, count, pos = [], [], [], 0, 0
    for m in MARKUP.finditer(line):
        add_text(line[pos:m.start()], stack, chars, owners)
        pos = m.end()
        name = TAG_NAME.match(m.group())
        if not name:
            continue  # comment, doctype, processing instruction
        closing, lower = name.group(1), name.group(2).lower()
        if lower in BLOCK:
            add_text(" ", stack, chars, owners)
        if lower != tag:
            continue
        if closing:
            if stack:
                stack.pop()
        else:
            count += 1
            if not m.group().rstrip(">").endswith("/"):
                stack.append(count - 1)
    add_text(line[pos:], stack, chars, owners)
    return split_words(chars, owners, count)


def add_text(raw, stack, chars, owners):
    open_now = tuple(stack)
    for c in html.unescape(raw):
        chars.append(c)
        owners.append(open_now)


def split_words(chars, owners, count):
    words, elements, current = [], [set() for _ in range(count)], []
    for c, own in zip(chars + [" "], owners + [()]):
        if not c.isspace():
            current.append(c)
            for k in own:
                elements[k].add(len(words))
            continue
        if current:
            words.append("".join(current))
            current = []
    return words, elements


def is_punct(c):
    return unicodedata.category(c).startswith("P")


def split_word(word):
    """Aligner tokens of one word as (token, is_core); the core keeps inner punctuation."""
    word = word.lower()
    i, k = 0, len(word)
    while i < k and is_punct(word[i]):
        i += 1
    while k > i and is_punct(word[k - 1]):
        k -= 1
    if i == k:
        return [(word, True)]
    parts = [(word[:i], False)] if i else []
    parts.append((word[i:k], True))
    if k < len(word):
        parts.append((word[k:], False))
    return parts


def tokenize(words):
    """Returns (tokens, owner): owner[t] is the word index of a core token, None otherwise."""
    tokens, owner = [], []
    for w, word in enumerate(words):
        for token, core in split_word(word):
            tokens.append(token)
            owner.append(w if core else None)
    return tokens, owner


def core(word):
    return next(token for token, is_core in split_word(word) if is_core)


# ---------------------------------------------------------------- aligner

class Vocab(dict):
    def ids(self, tokens):
        return [self.setdefault(t, len(self) + 1) for t in tokens]  # 0 is the null word


def digamma(x):
    r = 0.0
    while x < 6.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    return r + math.log(x) - 0.5 / x - f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (
        1 / 240 - f / 132))))


class Priors(dict):
    """(m, n) -> for each target position a list [p(null), p(1) .. p(n)] of fast_align's prior."""

    def __init__(self, lam, p0):
        super().__init__()
        self.lam, self.p0 = lam, p0

    def __missing__(self, key):
        m, n = key
        rows = []
        for j in range(1, m + 1):
            un = [math.exp(-self.lam * abs(j / m - i / n)) for i in range(1, n + 1)]
            z = sum(un) / (1.0 - self.p0)
            rows.append([self.p0] + [u / z for u in un])
        self[key] = rows
        return rows


def initial_table(pairs):
    """Uniform t(f|e) over the pairs that co-occur (the value is irrelevant while uniform)."""
    table = {}
    for src, tgt in pairs:
        for e in [NULL] + src:
            row = table.setdefault(e, {})
            for f in tgt:
                row[f] = 1.0
    return table


def expected_counts(pairs, table, priors):
    counts = {e: dict.fromkeys(row, 0.0) for e, row in table.items()}
    for src, tgt in pairs:
        rows = [table[e] for e in [NULL] + src]
        crows = [counts[e] for e in [NULL] + src]
        for f, prior in zip(tgt, priors[len(tgt), len(src)]):
            ps = [row[f] * a for row, a in zip(rows, prior)]
            inv = 1.0 / sum(ps)
            for crow, p in zip(crows, ps):
                crow[f] += p * inv
    return counts


def normalize(counts, alpha):
    """fast_align -v: t(f|e) = exp(digamma(c(e,f) + alpha) - digamma(sum_f c(e,f) + alpha))."""
    for row in counts.values():
        if alpha > 0:
            lg = digamma(sum(row.values()) + alpha * len(row))
            for f, c in row.items():
                row[f] = math.exp(digamma(c + alpha) - lg)
        else:
            tot = sum(row.values())
            for f, c in row.items():
                row[f] = c / tot
    return counts


def viterbi(src, tgt, table, priors):
    """Links (i, j) of 0-based source and target tokens; a null-aligned target word has none."""
    links = set()
    if not src:
        return links
    rows = [table.get(e, {}) for e in [NULL] + src]
    for j, (f, prior) in enumerate(zip(tgt, priors[len(tgt), len(src)])):
        ps = [row.get(f, 1e-9) * a for row, a in zip(rows, prior)]
        best = max(range(len(ps)), key=ps.__getitem__)
        if best > 0:
            links.add((best - 1, j))
    return links


def align_direction(train, tests, args):
    """Trains one direction on train + tests and returns the Viterbi links of each test pair."""
    pairs = [p for p in train + tests if p[0] and p[1]]
    priors = Priors(args.lam, args.p0)
    table = initial_table(pairs)
    for _ in range(args.iterations - 1):
        table = normalize(expected_counts(pairs, table, priors), args.alpha)
    return [viterbi(src, tgt, table, priors) for src, tgt in tests]


def grow_diag_final_and(fwd, rev, n, m):
    """Symmetrizes source-target links of an n-token source and m-token target like atools."""
    union, links = fwd | rev, fwd & rev
    src_done, tgt_done = {i for i, _ in links}, {j for _, j in links}
    added = True
    while added:
        added = False
        for i in range(n):
            for j in range(m):
                if (i, j) not in links:
                    continue
                for di, dj in NEIGHBOURS:
                    p = (i + di, j + dj)
                    if p in union and p not in links and \
                            (p[0] not in src_done or p[1] not in tgt_done):
                        links.add(p)
                        src_done.add(p[0])
                        tgt_done.add(p[1])
                        added = True
    for one_way in (fwd, rev):
        for i, j in sorted(one_way):
            if i not in src_done and j not in tgt_done:
                links.add((i, j))
                src_done.add(i)
                tgt_done.add(j)
    return links


def read_corpus(path, limit):
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


def symmetric_word_links(args, test_src_tok, test_tgt_tok):
    """Trains both directions; returns per test line the set of (source, target) token links."""
    train_src = read_corpus(args.train_src, args.max_train)
    train_tgt = read_corpus(args.train_tgt, args.max_train)
    if len(train_src) != len(train_tgt):
        sys.exit("tag_placement: the training files differ in length")
    vs, vt = Vocab(), Vocab()
    train = [(vs.ids(tokenize(s.split())[0]), vt.ids(tokenize(t.split())[0]))
             for s, t in zip(train_src, train_tgt)]
    tests = [(vs.ids(s), vt.ids(t)) for s, t in zip(test_src_tok, test_tgt_tok)]
    start = time.time()
    fwd = align_direction(train, tests, args)
    rev = align_direction([(t, s) for s, t in train], [(t, s) for s, t in tests], args)
    seconds = time.time() - start
    links = [grow_diag_final_and(f, {(i, j) for j, i in r}, len(s), len(t))
             for f, r, (s, t) in zip(fwd, rev, tests)]
    return links, len(train), seconds


# ---------------------------------------------------------------- judging

def word_links(token_links, src_owner, tgt_owner):
    """Token links -> (source word, target word) links, core tokens only."""
    return {(src_owner[i], tgt_owner[j]) for i, j in token_links
            if src_owner[i] is not None and tgt_owner[j] is not None}


def verdict(linked, covered):
    if not linked:
        return "unjudged"
    return "right" if linked & covered else "wrong"


def verbatim_words(src_words, out_words, covered_src):
    """Output word indices of the covered source words that occur verbatim once in the output."""
    out_cores = [core(w) for w in out_words]
    found = set()
    for s in covered_src:
        c = core(src_words[s])
        if (len(c) >= 3 or any(ch.isdigit() for ch in c)) and out_cores.count(c) == 1:
            found.add(out_cores.index(c))
    return found


def judge_line(src_words, src_elems, out_words, out_elems, links):
    """Returns one record per source element (verdict, linked words, verbatim outcome)."""
    records = []
    for k, covered_src in enumerate(src_elems):
        linked = {t for s, t in links if s in covered_src}
        if k >= len(out_elems):
            records.append({"verdict": "unpaired", "linked": linked, "exact": False,
                            "verbatim": None, "verbatim_aligner": None})
            continue
        covered_out = out_elems[k]
        verb = verbatim_words(src_words, out_words, covered_src)
        records.append({
            "verdict": verdict(linked, covered_out), "linked": linked,
            "exact": bool(linked) and linked == covered_out,
            "verbatim": bool(verb & covered_out) if verb else None,
            "verbatim_aligner": bool(verb & linked) if verb else None})
    return records


def percent(a, b):
    return round(100.0 * a / b, 1) if b else None


def figures(records, lines, n_src, n_out, mismatched, train_pairs, seconds):
    flat = [r for recs in records for r in recs]
    count = {v: sum(r["verdict"] == v for r in flat)
             for v in ("right", "wrong", "unjudged", "unpaired")}
    judged = count["right"] + count["wrong"]
    verb = [r for r in flat if r["verbatim"] is not None]
    return {
        "lines": lines, "elements_src": n_src, "elements_out": n_out,
        "lines_count_differs": mismatched, **count,
        "right_pct_of_judged": percent(count["right"], judged),
        "right_pct_unjudged_as_wrong": percent(count["right"], len(flat)),
        "exact": sum(r["exact"] for r in flat),
        "exact_pct_of_judged": percent(sum(r["exact"] for r in flat), judged),
        "verbatim_elements": len(verb),
        "verbatim_pct_tag_holds_word": percent(sum(r["verbatim"] for r in verb), len(verb)),
        "verbatim_pct_aligner_links_word": percent(
            sum(r["verbatim_aligner"] for r in verb), len(verb)),
        "train_pairs": train_pairs, "train_seconds": round(seconds, 1)}


def print_figures(fig, tag):
    rows = [
        ("lines", fig["lines"]),
        (f"<{tag}> elements src / out", f"{fig['elements_src']} / {fig['elements_out']}"),
        ("lines whose count differs", len(fig["lines_count_differs"])),
        ("right / wrong / unjudged / unpaired",
         f"{fig['right']} / {fig['wrong']} / {fig['unjudged']} / {fig['unpaired']}"),
        ("right % of judged", fig["right_pct_of_judged"]),
        ("right % (unjudged = wrong)", fig["right_pct_unjudged_as_wrong"]),
        ("exact % of judged", fig["exact_pct_of_judged"]),
        ("verbatim check: elements", fig["verbatim_elements"]),
        ("  % whose tag holds the word", fig["verbatim_pct_tag_holds_word"]),
        ("  % the aligner links to it", fig["verbatim_pct_aligner_links_word"]),
        ("aligner: pairs, seconds", f"{fig['train_pairs']}, {fig['train_seconds']}")]
    for name, value in rows:
        print(f"{name:<38} {value}")
    if fig["lines_count_differs"]:
        shown = " ".join(map(str, fig["lines_count_differs"][:30]))
        print(f"count differs on lines: {shown}")


def clean(text):
    return text.replace("\t", " ")  # a tab in the HTML would shift the TSV columns


def write_sample(path, n, seed, src_lines, out_lines, out_words, records):
    chosen = sorted(random.Random(seed).sample(range(len(src_lines)), min(n, len(src_lines))))
    with open(path, "w", encoding="utf-8") as f:
        f.write("line\tsrc\tout\tlinked\tverdict\thand\n")
        for i in chosen:
            linked = " | ".join(" ".join(out_words[i][w] for w in sorted(r["linked"]))
                                for r in records[i])
            verdicts = " | ".join(r["verdict"] for r in records[i])
            f.write(f"{i + 1}\t{clean(src_lines[i])}\t{clean(out_lines[i])}\t{clean(linked)}"
                    f"\t{verdicts}\t\n")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train-src", required=True)
    p.add_argument("--train-tgt", required=True)
    p.add_argument("--src", required=True, help="tagged source HTML, one line per segment")
    p.add_argument("--out", required=True, nargs="+",
                   help="the system's HTML output, same lines; several outputs (variants) are "
                        "judged by one aligner trained once with all of their pairs appended")
    p.add_argument("--tag", default="b")
    p.add_argument("--max-train", type=int, default=0, help="training lines used (0: all)")
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--lambda", dest="lam", type=float, default=4.0, help="diagonal tension")
    p.add_argument("--p0", type=float, default=0.08, help="null alignment probability")
    p.add_argument("--alpha", type=float, default=0.01, help="VB prior; 0 for plain EM")
    p.add_argument("--sample", type=int, default=0)
    p.add_argument("--sample-out")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = p.parse_args()
    if args.sample and not args.sample_out:
        p.error("--sample needs --sample-out")
    return args


def judge_output(args, tag, src_lines, src, src_tok, out_lines, links, train_pairs, seconds,
                 sample):
    """The figures of one output file, given its lines' token links."""
    out = [parse_html(line, tag) for line in out_lines]
    out_tok = [tokenize(words) for words, _ in out]
    records = [judge_line(sw, se, ow, oe, word_links(tl, so[1], oo[1]))
               for (sw, se), (ow, oe), tl, so, oo in zip(src, out, links, src_tok, out_tok)]
    mismatched = [i + 1 for i, (s, o) in enumerate(zip(src, out)) if len(s[1]) != len(o[1])]
    fig = figures(records, len(src_lines), sum(len(e) for _, e in src),
                  sum(len(e) for _, e in out), mismatched, train_pairs, seconds)
    if sample:
        write_sample(args.sample_out, args.sample, args.seed, src_lines, out_lines,
                     [w for w, _ in out], records)
    return fig


def main():
    args = parse_args()
    tag = args.tag.lower()
    src_lines = read_corpus(args.src, 0)
    outputs = [read_corpus(path, 0) for path in args.out]
    for path, lines in zip(args.out, outputs):
        if len(src_lines) != len(lines):
            sys.exit(f"tag_placement: {args.src} has {len(src_lines)} lines, "
                     f"{path} {len(lines)}")
    src = [parse_html(line, tag) for line in src_lines]
    src_tok = [tokenize(words) for words, _ in src]
    out_toks = [[tokenize(words)[0] for words, _ in (parse_html(l, tag) for l in lines)]
                for lines in outputs]
    n = len(src_lines)
    links, train_pairs, seconds = symmetric_word_links(
        args, [t for t, _ in src_tok] * len(outputs), [t for tok in out_toks for t in tok])
    for k, (path, lines) in enumerate(zip(args.out, outputs)):
        fig = judge_output(args, tag, src_lines, src, src_tok, lines, links[k * n:(k + 1) * n],
                           train_pairs, seconds, args.sample and k == 0)
        if args.json:
            print(json.dumps(dict(fig, output=path)))
        else:
            if len(outputs) > 1:
                print(f"== {path}")
            print_figures(fig, args.tag)


if __name__ == "__main__":
    main()
