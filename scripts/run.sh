#!/usr/bin/env bash
# The main job: for now the fp64 gradient checks of every op (the trainer replaces this once
# it lands). Expects build/ from scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
exec build/gdn gradcheck --op all
