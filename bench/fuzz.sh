#!/usr/bin/env bash
# Longer fuzzing of the config parser, the checkpoint loader and the env step functions
# (proptest targets in crates/proxima/tests/fuzz.rs), outside CI's fast suite.
# Usage: bench/fuzz.sh [CASES]   (default 20000 cases per target; bounded by a 20-minute timeout)
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-20000}
start=$(date +%s)
PROPTEST_RNG_SEED=$(od -An -N4 -tu4 /dev/urandom | tr -d " ") PROPTEST_CASES=$cases timeout 1200 cargo test --release -q -p proxima --test fuzz -- --test-threads=2
echo "fuzz: $cases cases per target, no panic, $(( $(date +%s) - start )) s"
