#!/usr/bin/env bash
# Regenerates the tokenizer.json fixtures of tests/test_tokenizer_json.cpp with the real Hugging
# Face `tokenizers` (pinned: GDN_TOKENIZERS_VERSION, default 0.23.3), installed from PyPI into a
# virtual environment of its own (.venv-tokenizers/, made once and reused), then runs
# scripts/make_tokenizer_fixtures.py with the arguments given (none: all fixtures;
# --unicode-tables: src/data/tokenizer_json_unicode_tables.cpp; --bench MB: the library's speed).
# Usage: scripts/make_tokenizer_fixtures.sh [ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-tokenizers
version=${GDN_TOKENIZERS_VERSION:-0.23.3}
check="import sys, tokenizers; sys.exit(tokenizers.__version__ != '$version')"
if ! "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "make_tokenizer_fixtures: installing tokenizers==$version from PyPI into $venv" >&2
  if ! python3 -m venv "$venv" >&2; then
    echo "make_tokenizer_fixtures: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
  "$venv/bin/python" -m pip install -q "tokenizers==$version" >&2
fi
exec "$venv/bin/python" scripts/make_tokenizer_fixtures.py "$@"
