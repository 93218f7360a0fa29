"""Checks that the real `tensorboard` package reads a Proxima run's event file.

Usage: pip install tensorboard && python bench/check_tensorboard.py RUN_DIR
Prints the scalar tags and the first/last episodic return; exits 1 if nothing could be read.
"""
import glob
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

files = glob.glob(f"{sys.argv[1]}/events.out.tfevents.*")
if not files:
    sys.exit(f"no event file in {sys.argv[1]}")
ea = EventAccumulator(files[0])
ea.Reload()
tags = ea.Tags()["scalars"]
print(f"{len(tags)} scalar tags: {', '.join(tags)}")
ret = ea.Scalars("charts/episodic_return")
print(f"charts/episodic_return: {len(ret)} points, first {ret[0].value} at step {ret[0].step}, last {ret[-1].value} at step {ret[-1].step}")
if not ret:
    sys.exit(1)
