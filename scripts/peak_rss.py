#!/usr/bin/env python3
"""Runs a command and writes its peak resident set size (kB, the largest of its process tree's
members as the kernel reports through wait4) to a file.

    scripts/peak_rss.py OUT_FILE COMMAND [ARGS...]

The command's exit status is passed through.
"""
import resource
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
status = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write(f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}\n")
sys.exit(status)
