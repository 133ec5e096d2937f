#!/usr/bin/env python3
"""Checks the command lines of README.md and docs/*.md against the nmt binary itself.

    check_docs.py --nmt build/nmt [FILE.md ...]     (default: README.md docs/*.md)
    check_docs.py --nmt build/nmt --self-test

Every nmt command line in a shell block (```sh ... ```) or an inline code span must name a
subcommand that `nmt --help` lists and flags that `nmt SUBCOMMAND --help` lists; every
`--set KEY=VALUE` must name a key of `nmt train --print-config-reference`; every repository file
a command or a relative link names must exist; no line is longer than 100 characters (but the
rows docs/config.md takes from the binary); no page speaks of sessions. Prints one line a
problem; exits 1 if any.
--self-test feeds it a page with a flag that does not exist and checks that it is caught.
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH_PREFIXES = ("configs/", "scripts/", "docs/", "src/", "tests/", ".ci/")


def help_of(nmt, *args):
    return subprocess.run([nmt, *args, "--help"], capture_output=True, text=True,
                          check=True).stdout


class Binary:
    def __init__(self, nmt):
        top = help_of(nmt)
        section = top.split("Subcommands:", 1)[1]
        self.subcommands = set(re.findall(r"^  (\w+)\s", section, re.M))
        self.flags = {}
        for sub in self.subcommands:
            self.flags[sub] = set(re.findall(r"(--[a-z][a-z0-9-]*)", help_of(nmt, sub)))
        reference = subprocess.run([nmt, "train", "--print-config-reference"],
                                   capture_output=True, text=True, check=True).stdout
        self.keys = set(re.findall(r"^\| `([^`]+)`", reference, re.M))

    def known_key(self, key):
        if key in self.keys:
            return True
        # data.train[].src: the list itself and its elements' keys
        return re.sub(r"\[\d*\]", "[]", key) in self.keys


def shell_blocks(text):
    """(line number, command) for each command of the page's shell blocks and code spans."""
    lines = text.split("\n")
    out = []
    fence = None  # the open block's language, or None outside blocks
    for i, line in enumerate(lines):
        if line.strip().startswith("```"):
            fence = line.strip()[3:].strip() if fence is None else None
            continue
        if fence is not None:
            if fence in ("sh", "bash", "shell", "console", ""):
                out.append((i + 1, line))
        else:
            for span in re.findall(r"`([^`]+)`", line):
                if re.match(r"(\S*/)?nmt\s", span):
                    out.append((i + 1, span))
    # Continuation lines.
    joined = []
    buf, start = "", None
    for n, line in out:
        if start is None:
            start = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        joined.append((start, buf + line))
        buf, start = "", None
    if buf:
        joined.append((start, buf))
    return joined


def strip_comment(line):
    quote = None
    for k, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k]
    return line


def commands(line):
    return [c for c in re.split(r"&&|\|\||[|;]", strip_comment(line)) if c.strip()]


def check_command(words, binary, where, problems):
    for k, w in enumerate(words):
        if re.fullmatch(r"(\S*/)?nmt", w):
            rest = words[k + 1:]
            break
    else:
        return
    if not rest or not re.fullmatch(r"[a-z]+", rest[0]):
        return  # a placeholder such as <subcommand>, or options only
    sub = rest[0]
    if sub not in binary.subcommands:
        problems.append(f"{where}: nmt has no subcommand '{sub}'")
        return
    for k, w in enumerate(rest[1:], 1):
        w = w.strip("[]()")
        if not w.startswith("--"):
            continue
        flag = w.split("=", 1)[0]
        if flag not in binary.flags[sub]:
            problems.append(f"{where}: nmt {sub} has no flag {flag}")
        if flag == "--set":
            value = w.split("=", 1)[1] if "=" in w else (rest[k + 1] if k + 1 < len(rest) else "")
            key = value.strip("'\"[]").split("=", 1)[0]
            # KEY or key.path placeholders are not keys
            if key and key != key.upper() and "." in key and not binary.known_key(key):
                problems.append(f"{where}: --set {key}: no such config key")


def check_paths(words, where, problems):
    for w in words:
        w = w.strip("'\"[](),")
        if w.startswith(PATH_PREFIXES) and not re.search(r"[A-Z]{2,}|\.\.\.|[*$<{]", w):
            path = w.split("=", 1)[-1]
            if not os.path.exists(os.path.join(ROOT, path)):
                problems.append(f"{where}: {path} does not exist")


def check_page(path, binary, problems):
    text = open(path, encoding="utf-8").read()
    name = os.path.relpath(path, ROOT)
    for n, line in shell_blocks(text):
        for cmd in commands(line):
            words = cmd.split()
            where = f"{name}:{n}"
            check_command(words, binary, where, problems)
            check_paths(words, where, problems)
    for n, line in enumerate(text.split("\n"), 1):
        generated = name == os.path.join("docs", "config.md") and line.startswith("| `")
        if len(line) > 100 and not generated:
            problems.append(f"{name}:{n}: {len(line)} characters (at most 100)")
        if re.search(r"\bsessions?\b", line, re.I):
            problems.append(f"{name}:{n}: speaks of a session: a page speaks of the project")
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", line):
            if re.match(r"[a-z]+://", target):
                continue
            full = os.path.normpath(os.path.join(os.path.dirname(path), target))
            if not os.path.exists(full):
                problems.append(f"{name}:{n}: link to {target}, which does not exist")


def self_test(binary):
    page = ("# Example\n\n```sh\nbuild/nmt train --config configs/quickstart.json "
            "--run-dir runs/q --no-such-flag\nbuild/nmt translate --checkpoint runs/q "
            "--beam 5\n```\n\nAlso `build/nmt eval --hyp h --ref r --bleu-only`.\n")
    with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
        f.write(page)
    problems = []
    check_page(f.name, binary, problems)
    os.unlink(f.name)
    expected = ["nmt train has no flag --no-such-flag", "nmt eval has no flag --bleu-only"]
    ok = len(problems) == 2 and all(any(e in p for p in problems) for e in expected)
    print("self-test: " + ("caught " if ok else "FAILED, got ") + "; ".join(problems))
    return ok


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nmt", required=True)
    p.add_argument("--self-test", action="store_true")
    p.add_argument("files", nargs="*")
    args = p.parse_args()
    binary = Binary(args.nmt)
    if args.self_test:
        sys.exit(0 if self_test(binary) else 1)
    files = args.files or [os.path.join(ROOT, f) for f in
                           ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "*.md")))
    problems = []
    for f in files:
        check_page(f, binary, problems)
    for problem in problems:
        print(problem)
    print(f"check_docs: {len(files)} pages, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
