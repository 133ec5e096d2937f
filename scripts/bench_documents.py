#!/usr/bin/env python3
"""Documents against lines: one checkpoint, the same sentences translated one a line and as
paragraphs (`translate --format text`), in one run.

Paragraphs are runs of 2-6 consecutive sentences of SRC joined with a space (seeded), one a
line, with a blank line after every tenth; their references are REF's sentences joined the same
way. Prints BLEU of both (against the joined references), whether the line count and blank
lines of the paragraph file came back, and sentences/s of both (best of --repeat rounds,
alternated). With --html, the paragraphs also go through `--format html` as <p> elements with
one content word (the longest of 4 letters or more) of every sentence in <b>...</b>:
scripts/check_xml.py checks that every output line parses and has the source's tags, and the
output's text (tags removed) is scored like the others.

  scripts/bench_documents.py --checkpoint RUN --src val.en --ref val.de [--work DIR] \\
      [--html] [--punctuate]
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import time


def paragraphs(n, seed):
    """[start, end) runs of 2-6 lines covering 0..n-1."""
    rng, runs, at = random.Random(seed), [], 0
    while at < n:
        size = min(rng.randint(2, 6), n - at)
        runs.append((at, at + size))
        at += size
    return runs


def translate(args, src, out, extra):
    cmd = [args.nmt, "translate", "--checkpoint", args.checkpoint, "--input", src, "--output",
           out, "--beam", str(args.beam), "--threads", str(args.threads)] + extra
    start = time.monotonic()
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def bleu(args, hyp, ref):
    r = subprocess.run([args.nmt, "eval", "--hyp", hyp, "--ref", ref, "--json"], check=True,
                       capture_output=True, text=True)
    return json.loads(r.stdout)["bleu"]


def tag_sentence(sentence):
    """The sentence with its longest word of 4 letters or more (the first of equals) in <b>."""
    words = sentence.split(" ")
    best = max(range(len(words)), key=lambda i: (len(re.sub(r"\W", "", words[i])), -i))
    if len(re.sub(r"\W", "", words[best])) < 4:
        return html_escape(sentence)
    m = re.match(r"^(\W*)(.*?)(\W*)$", words[best])
    out = [html_escape(w) for w in words]
    out[best] = html_escape(m.group(1)) + "<b>" + html_escape(m.group(2)) + "</b>" + \
        html_escape(m.group(3))
    return " ".join(out)


def html_escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def check_html(args, w, tagged):
    """check_xml.py's verdicts on the html output, and the path of its text."""
    check = [sys.executable, os.path.join(os.path.dirname(__file__), "check_xml.py"),
             w("html.hyp"), "--compare", tagged, "--strip", w("html.text")]
    r = subprocess.run(check, capture_output=True, text=True)
    return r.stdout.strip(), w("html.text")


def punctuate(sentences):
    """Each sentence ending in final punctuation (before closing quotes or brackets), adding a
    period where it has none."""
    return [s if not s.strip() or s.rstrip().rstrip("\"'»”’)").endswith(tuple(".?!…"))
            else s.rstrip() + "." for s in sentences]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--nmt", default="build/nmt")
    p.add_argument("--work", default="runs/bench_documents")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--html", action="store_true", help="also --format html on tagged paragraphs")
    p.add_argument("--punctuate", action="store_true",
                   help="end every source and reference sentence that lacks final punctuation "
                        "with a period first, as a document's sentences are (captions often "
                        "lack one, and then no splitter can find where they end)")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda name: os.path.join(args.work, name)
    src = open(args.src, encoding="utf-8").read().splitlines()
    ref = open(args.ref, encoding="utf-8").read().splitlines()
    if args.punctuate:
        src, ref = punctuate(src), punctuate(ref)
    runs = paragraphs(len(src), args.seed)
    with open(w("sentences.txt"), "w", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in src))
    para_lines, ref_lines = [], []
    for k, (a, b) in enumerate(runs):
        para_lines.append(" ".join(src[a:b]))
        ref_lines.append(" ".join(ref[a:b]))
        if k % 10 == 9:
            para_lines.append("")
    with open(w("paragraphs.txt"), "w", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in para_lines))
    with open(w("paragraphs.ref"), "w", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in ref_lines))
    with open(w("paragraphs.html"), "w", encoding="utf-8") as f:
        f.write("".join("<p>" + " ".join(tag_sentence(x) for x in src[a:b]) + "</p>\n"
                        for a, b in runs))
    times = {"lines": [], "text": []} | ({"html": []} if args.html else {})
    for _ in range(args.repeat):
        times["lines"].append(translate(args, w("sentences.txt"), w("lines.hyp"), []))
        times["text"].append(translate(args, w("paragraphs.txt"), w("text.hyp"),
                                       ["--format", "text"]))
        if args.html:
            times["html"].append(translate(args, w("paragraphs.html"), w("html.hyp"),
                                           ["--format", "html"]))
    lines_hyp = open(w("lines.hyp"), encoding="utf-8").read().splitlines()
    text_out = open(w("text.hyp"), encoding="utf-8").read().splitlines()
    same_shape = len(text_out) == len(para_lines) and all(
        (a == "") == (b == "") for a, b in zip(para_lines, text_out))
    with open(w("text.para.hyp"), "w", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in text_out if s != ""))
    with open(w("lines.para.hyp"), "w", encoding="utf-8") as f:
        f.write("".join(" ".join(lines_hyp[a:b]) + "\n" for a, b in runs))
    b_lines = bleu(args, w("lines.para.hyp"), w("paragraphs.ref"))
    b_text = bleu(args, w("text.para.hyp"), w("paragraphs.ref"))
    n = len(src)
    speed = {k: n / min(v) for k, v in times.items()}
    print(f"sentences {n}, paragraphs {len(runs)}, blank lines {len(para_lines) - len(runs)}")
    print(f"BLEU one a line, joined: {b_lines:.2f}")
    print(f"BLEU --format text:      {b_text:.2f}  (difference {b_text - b_lines:+.2f})")
    print(f"lines and blank lines preserved: {'yes' if same_shape else 'NO'} "
          f"({len(text_out)} of {len(para_lines)} lines)")
    print(f"sentences/s: lines {speed['lines']:.1f}, text {speed['text']:.1f} "
          f"(text/lines {speed['text'] / speed['lines']:.3f}); rounds: "
          + ", ".join(f"{a:.2f}/{b:.2f} s" for a, b in zip(times['lines'], times['text'])))
    if args.html:
        verdict, text = check_html(args, w, w("paragraphs.html"))
        b_html = bleu(args, text, w("paragraphs.ref"))
        print(verdict)
        print(f"BLEU --format html, tags removed: {b_html:.2f}  (against text {b_html - b_text:+.2f})")
        print(f"sentences/s: html {speed['html']:.1f} (html/lines "
              f"{speed['html'] / speed['lines']:.3f}); rounds: "
              + ", ".join(f"{t:.2f} s" for t in times["html"]))


if __name__ == "__main__":
    main()
