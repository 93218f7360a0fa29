"""Time per observation of onnxruntime on an exported policy (`proxima export --onnx`), one row at a time and in
batches, one thread (intra_op_num_threads=1): `python bench/onnx_timing.py policy.onnx [ROWS ...]`. One JSON line
per batch size, as crates/proxima-policy/examples/act_timing.rs prints them."""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import onnxruntime as ort


def main() -> None:
    path, sizes = sys.argv[1], [int(a) for a in sys.argv[2:]] or [1, 1000]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    obs_input = session.get_inputs()[0]
    for rows in sizes:
        shape = [rows] + [int(d) for d in obs_input.shape[1:]]
        count = int(np.prod(shape))
        if "uint8" in obs_input.type:
            obs = (np.arange(count) * 7919 % 256).astype(np.uint8).reshape(shape)
        else:
            obs = ((np.arange(count) * 7919 % 2000) / 1000.0 - 1.0).astype(np.float32).reshape(shape)
        session.run(["action"], {obs_input.name: obs})
        start, reps = time.perf_counter(), 0
        while reps < 20 or time.perf_counter() - start < 2.0:  # at least 20 calls and 2 s
            session.run(["action"], {obs_input.name: obs})
            reps += 1
        per_obs_us = (time.perf_counter() - start) * 1e6 / (reps * rows)
        print(json.dumps({"impl": "onnxruntime", "rows": rows, "reps": reps, "us_per_obs": round(per_obs_us, 3)}))


if __name__ == "__main__":
    main()
