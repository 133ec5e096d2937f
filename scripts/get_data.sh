#!/usr/bin/env bash
# Fetch a parallel corpus into the repository's data/ directory.
#
#   scripts/get_data.sh multi30k [--from DIR] [--out DIR]
#
# multi30k: Multi30k task 1 (en/de/fr), files {train,val,test_2016_flickr}.{en,de,fr}.
#   --from DIR  copy the (uncompressed) files from DIR instead of downloading
#   --out DIR   destination (default: <repo>/data/multi30k)
# Without --from the gzipped raw files are downloaded from the public GitHub
# repository multi30k/dataset with curl or wget and decompressed.
# Files are staged in a temporary directory inside the destination, their line
# counts are checked, and only then are they moved into place, so an
# interrupted or failed run never leaves partial files behind. Re-running
# overwrites the previous files.
set -euo pipefail

PROG=$(basename "$0")
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "$SCRIPT_DIR")

M30K_URL=https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw
M30K_SPLITS=(train val test_2016_flickr)
M30K_LANGS=(en de fr)
declare -A M30K_LINES=([train]=29000 [val]=1014 [test_2016_flickr]=1000)

usage() {
    cat >&2 <<USAGE
usage: $PROG multi30k [--from DIR] [--out DIR]

  multi30k     Multi30k task 1: {train,val,test_2016_flickr}.{en,de,fr}
  --from DIR   copy the files from DIR instead of downloading them
  --out DIR    output directory (default: $REPO_ROOT/data/multi30k)
USAGE
    exit 2
}

die() {
    echo "$PROG: error: $*" >&2
    exit 1
}

# Number of lines, counting a final line without a trailing newline.
count_lines() {
    awk 'END { print NR }' "$1"
}

# ---------------------------------------------------------------- arguments --
[[ $# -ge 1 ]] || usage
case "$1" in
    -h|--help) usage ;;
    multi30k) dataset=$1 ;;
    *) echo "$PROG: unknown dataset: $1" >&2; usage ;;
esac
shift

from_dir=""
out_dir="$REPO_ROOT/data/$dataset"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --from)   [[ $# -ge 2 && -n $2 ]] || usage; from_dir=$2; shift 2 ;;
        --from=?*) from_dir=${1#--from=}; shift ;;
        --out)    [[ $# -ge 2 && -n $2 ]] || usage; out_dir=$2; shift 2 ;;
        --out=?*) out_dir=${1#--out=}; shift ;;
        -h|--help) usage ;;
        *) echo "$PROG: unknown option: $1" >&2; usage ;;
    esac
done

files=()
for split in "${M30K_SPLITS[@]}"; do
    for lang in "${M30K_LANGS[@]}"; do
        files+=("$split.$lang")
    done
done

# ------------------------------------------------------------------ staging --
mkdir -p "$out_dir" || die "cannot create output directory: $out_dir"
stage=""
cleanup() { if [[ -n $stage ]]; then rm -rf "$stage"; fi; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
stage=$(mktemp -d "$out_dir/.get_data.XXXXXX") || die "cannot create a temporary directory in $out_dir"

if [[ -n $from_dir ]]; then
    [[ -d $from_dir ]] || die "--from directory does not exist: $from_dir"
    missing=()
    for f in "${files[@]}"; do
        [[ -f $from_dir/$f ]] || missing+=("$from_dir/$f")
    done
    if [[ ${#missing[@]} -gt 0 ]]; then
        die "missing file(s) in --from directory: ${missing[*]}"
    fi
    for f in "${files[@]}"; do
        cp -- "$from_dir/$f" "$stage/$f" || die "cannot copy $from_dir/$f"
    done
    source_desc="copied from $from_dir"
else
    if command -v curl >/dev/null 2>&1; then
        fetch() { curl -fsSL --connect-timeout 15 --retry 2 -o "$2" "$1"; }
    elif command -v wget >/dev/null 2>&1; then
        fetch() { wget -q --timeout=15 --tries=3 -O "$2" "$1"; }
    else
        die "neither curl nor wget is installed; install one, or download the files yourself and use --from DIR"
    fi
    for f in "${files[@]}"; do
        url="$M30K_URL/$f.gz"
        echo "$PROG: downloading $url" >&2
        fetch "$url" "$stage/$f.gz" \
            || die "download failed: $url (is the network reachable? alternatively fetch the files elsewhere and pass --from DIR)"
        gunzip -c -- "$stage/$f.gz" > "$stage/$f" || die "cannot decompress $url (corrupt download?)"
        rm -f -- "$stage/$f.gz"
    done
    source_desc="downloaded from $M30K_URL"
fi

# ------------------------------------------------------------------- verify --
bad=()
for split in "${M30K_SPLITS[@]}"; do
    want=${M30K_LINES[$split]}
    for lang in "${M30K_LANGS[@]}"; do
        got=$(count_lines "$stage/$split.$lang")
        [[ $got -eq $want ]] || bad+=("$split.$lang has $got lines, expected $want")
    done
done
if [[ ${#bad[@]} -gt 0 ]]; then
    printf '%s: error: unexpected line count: %s\n' "$PROG" "${bad[@]}" >&2
    die "verification failed; nothing was written to $out_dir"
fi

# ------------------------------------------------------------ move in place --
for f in "${files[@]}"; do
    mv -f -- "$stage/$f" "$out_dir/$f"
done

echo "$dataset: ${#files[@]} files (train ${M30K_LINES[train]}, val ${M30K_LINES[val]}, test_2016_flickr ${M30K_LINES[test_2016_flickr]} lines x ${M30K_LANGS[*]}) $source_desc -> $out_dir"
