#!/usr/bin/env bash
# Time per observation of a trained policy in the inference crate (proxima-policy, Rust, one
# thread) and in onnxruntime (its exported ONNX model, from Python, one thread), one row at a time
# and in batches of 1,000, side by side in one run. onnxruntime's single rows include the Python
# call (what a Python user of the exported file pays).
# Usage: bench/policy_timing.sh RUN_DIR_OR_CHECKPOINT   env: PYTHON (with onnxruntime), ROWS ("1 1000")
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?give a run directory or checkpoint}; py=${PYTHON:-python3}; rows=${ROWS:-1 1000}
cargo build --release -q -p proxima-cli --features gym   # as the other bench scripts build it (one binary for all)
cargo build --release -q -p proxima-policy --example act_timing
target=${CARGO_TARGET_DIR:-target}
ckpt=$src; [ -d "$src" ] && ckpt=$src/model.safetensors
onnx=$(mktemp -d)/policy.onnx
"$target/release/proxima" export "$src" --onnx "$onnx" > /dev/null
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"; date
# shellcheck disable=SC2086
"$target/release/examples/act_timing" "$ckpt" $rows
# shellcheck disable=SC2086
"$py" bench/onnx_timing.py "$onnx" $rows
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
