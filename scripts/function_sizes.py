#!/usr/bin/env python3
"""Lines of every function body in src/, longest first.

    function_sizes.py [--top N] [--max LINES] [DIR]

Counts from a function's signature line to its closing brace (comments and blank lines
included), for functions at namespace or class scope: a lambda or a local class counts as part
of the function that holds it. With --max, exits 1 when a function is longer, except those
marked with a comment "// data table" on the line before their signature.
"""

import argparse
import os
import re
import sys

CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|try)\s*(\(|\{|$)")
SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b[^(){};]*$")


def strip(text):
    """Comments and string/char literals blanked out, line structure kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    raw = open(path, encoding="utf-8").read()
    text = strip(raw)
    raw_lines = raw.split("\n")
    scopes = []  # stack: True for a non-function scope (namespace, class), False for a body
    start = 0  # offset after the last ';', '{' or '}' at this level
    found = []
    for k, c in enumerate(text):
        if c == "{":
            head = text[start:k].strip()
            in_function = any(s is False for s in scopes)
            if in_function:
                scopes.append(None)
            elif SCOPE.search(head) or head.startswith("extern") or not head.endswith(
                    (")", "const", "override", "noexcept", "final")) and "->" not in head[-40:]:
                scopes.append(True)
            elif CONTROL.search(head) and not re.search(r"\)\s*(const\s*)?$", head):
                scopes.append(None)
            else:
                line = text.count("\n", 0, k - len(text[start:k].lstrip()) if head else k) + 1
                first = text.count("\n", 0, start + len(text[start:k]) - len(text[start:k].lstrip())) + 1
                name = re.findall(r"([~\w:]+)\s*\(", head)
                scopes.append(False)
                found.append([name[-1] if name else "?", first, k, line])
            start = k + 1
        elif c == "}":
            kind = scopes.pop() if scopes else None
            if kind is False:
                f = found[-1]
                last = text.count("\n", 0, k) + 1
                f.append(last)
            start = k + 1
        elif c == ";":
            start = k + 1
    out = []
    for name, first, _, _, *last in found:
        if not last:
            continue
        marked = first >= 2 and "data table" in raw_lines[first - 2]
        out.append((last[0] - first + 1, f"{os.path.relpath(path)}:{first}", name, marked))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--max", type=int, default=0)
    p.add_argument("dir", nargs="?", default="src")
    args = p.parse_args()
    all_functions = []
    for root, _, files in os.walk(args.dir):
        for f in files:
            if f.endswith((".cpp", ".h", ".cu")):
                all_functions += functions(os.path.join(root, f))
    all_functions.sort(reverse=True)
    for lines, where, name, marked in all_functions[:args.top]:
        print(f"{lines:5d}  {where}  {name}{'  (data table)' if marked else ''}")
    over = [f for f in all_functions if args.max and f[0] > args.max and not f[3]]
    print(f"function_sizes: {len(all_functions)} functions, {len(over)} over {args.max or '-'} lines")
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
