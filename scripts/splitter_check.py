#!/usr/bin/env python3
"""Boundary accuracy of a sentence splitter, on paragraphs made by joining known sentences.

  scripts/splitter_check.py [--paragraphs 400] data/multi30k/val.en -- SPLITTER [ARGS...]

reads SENTENCES (one a line), joins runs of 2-6 consecutive ones with a single space into
paragraphs (seeded, so the same file gives the same paragraphs), writes them one a line to
--out, and runs COMMAND with that file as standard input. COMMAND prints each paragraph's
sentences one a line and an empty line after each paragraph. A boundary is a join point; the
splitter's are found by counting non-space characters, so a splitter that changes the spaces
inside a sentence is still measured. Prints the boundaries found, missed and spurious (missed
ones also counted apart where the sentence before ends without . ? ! and so cannot be found),
and the first errors with their context. --punctuate first ends every sentence that lacks final
punctuation with a period, as a document's sentences are.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

CLOSERS = "\"'»”’)"
FINAL = tuple(".?!…")


def make_paragraphs(sentences, count, seed, shortest, longest):
    """Paragraphs as lists of consecutive sentences, cycling through the file."""
    rng = random.Random(seed)
    paragraphs, at = [], 0
    while len(paragraphs) < count:
        size = rng.randint(shortest, longest)
        if at + size > len(sentences):
            at = 0
        paragraphs.append(sentences[at:at + size])
        at += size
    return paragraphs


def run_splitter(command, path):
    """The sentences COMMAND prints for each paragraph of the file at path."""
    with open(path, encoding="utf-8") as stdin:
        done = subprocess.run(command, stdin=stdin, stdout=subprocess.PIPE, check=True)
    groups, current = [], []
    for line in done.stdout.decode("utf-8", errors="surrogateescape").split("\n"):
        if line.strip():
            current.append(line)
        else:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def cuts(sentences):
    """Each boundary as the number of non-space characters before it."""
    out, total = [], 0
    for s in sentences[:-1]:
        total += sum(not c.isspace() for c in s)
        out.append(total)
    return out


def context(text, cut, width=40):
    """The paragraph around the boundary after cut non-space characters, marked with ' | '."""
    seen = 0
    for i, c in enumerate(text):
        if seen == cut:
            while i < len(text) and text[i].isspace():
                i += 1
            return text[max(0, i - width):i].rstrip() + " | " + text[i:i + width]
        seen += not c.isspace()
    return text[-width:] + " |"


def score(paragraphs, groups):
    counts = dict(expected=0, found=0, missed=0, unpunctuated=0, spurious=0, altered=0)
    errors = []
    for sentences, got in zip(paragraphs, groups):
        text = " ".join(sentences)
        expected, predicted = cuts(sentences), cuts(got)
        counts["expected"] += len(expected)
        if sum(not c.isspace() for c in "".join(got)) != sum(not c.isspace() for c in text):
            counts["altered"] += 1
            errors.append(("ALTERED", text[:80]))
            continue
        before = {cut: s for cut, s in zip(expected, sentences)}
        for cut in sorted(set(expected) | set(predicted)):
            if cut in expected and cut in predicted:
                counts["found"] += 1
            elif cut in expected:
                counts["missed"] += 1
                unpunctuated = not before[cut].rstrip(CLOSERS).endswith(FINAL)
                counts["unpunctuated"] += unpunctuated
                errors.append(("MISSED*" if unpunctuated else "MISSED", context(text, cut)))
            else:
                counts["spurious"] += 1
                errors.append(("SPURIOUS", context(text, cut)))
    return counts, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sentences", help="a file of sentences, one a line")
    ap.add_argument("command", nargs=argparse.REMAINDER,
                    help="-- and the splitter's command line (reads standard input)")
    ap.add_argument("--paragraphs", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min", type=int, default=2, help="fewest sentences in a paragraph")
    ap.add_argument("--max", type=int, default=6, help="most sentences in a paragraph")
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "splitter_check.txt"),
                    help="where the paragraphs are written")
    ap.add_argument("--errors", type=int, default=20, help="errors listed")
    ap.add_argument("--punctuate", action="store_true",
                    help="end each sentence without final punctuation with a period, as prose "
                         "has it (captions often lack one)")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no splitter command given (after --)")
    with open(args.sentences, encoding="utf-8") as f:
        sentences = [" ".join(line.split()) for line in f]
    sentences = [s for s in sentences if s]
    if args.punctuate:
        sentences = [s if s.rstrip(CLOSERS).endswith(FINAL) else s + "." for s in sentences]
    if len(sentences) < args.max:
        ap.error(f"{args.sentences}: fewer than {args.max} sentences")
    paragraphs = make_paragraphs(sentences, args.paragraphs, args.seed, args.min, args.max)
    with open(args.out, "w", encoding="utf-8") as f:
        f.writelines(" ".join(p) + "\n" for p in paragraphs)
    groups = run_splitter(command, args.out)
    if len(groups) < len(paragraphs):
        sys.exit(f"the splitter gave {len(groups)} paragraphs for {len(paragraphs)}")
    counts, errors = score(paragraphs, groups)
    n = max(counts["expected"], 1)
    print(f"{len(paragraphs)} paragraphs, {counts['expected']} boundaries ({args.out})")
    print(f"right    {counts['found']:6d}  {100.0 * counts['found'] / n:6.2f}%")
    print(f"missed   {counts['missed']:6d}  {100.0 * counts['missed'] / n:6.2f}%"
          f"  ({counts['unpunctuated']} after a sentence without final punctuation)")
    print(f"spurious {counts['spurious']:6d}  {100.0 * counts['spurious'] / n:6.2f}%")
    if counts["altered"]:
        print(f"altered  {counts['altered']:6d}  paragraphs whose text the splitter changed")
    # The misses no rule can avoid (MISSED*: no final punctuation) come last.
    errors.sort(key=lambda e: e[0] == "MISSED*")
    for kind, where in errors[:args.errors]:
        print(f"  {kind:8s} {where}")


if __name__ == "__main__":
    main()
