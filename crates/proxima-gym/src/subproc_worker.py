"""Proxima's subprocess worker for `vector_env = "subproc"` (crates/proxima-gym/src/subproc.rs).

Run as `python -c <this file> CONFIG_JSON` by the parent, one process per group of envs. It makes
`k` Gymnasium envs (`gymnasium.make(spec)`), then answers the parent's messages on its stdin and
stdout (the env's own prints go to stderr, so they cannot corrupt the protocol). Everything is
little-endian; every reply is a tag byte, a u32 payload length and the payload.

    parent -> worker   b"R" u64 seed          reset env j with seed + first + j
                       b"S" f32[k, act_dim]   step every env (same-step autoreset)
                       end of file            close the envs and exit
    worker -> parent   b"O" payload           R: f32[k, obs_dim], then u8[k, mask_dim] (masked envs)
                                              S: f32[k, obs_dim] f64[k] u8[k] (bit 0 terminated,
                                                 bit 1 truncated), u8[k, mask_dim] (masked envs: the
                                                 masks of the current observations, 1 = valid), then
                                                 f32[obs_dim] for each env whose episode ended, in
                                                 env order
                       b"E" utf-8 text        an error; the parent stops training with it

The conversions are the bridge's for one env (`GymEnv` in lib.rs), so the results are the same
bits: observations `np.asarray(o).astype("<f4")` after a shape check, rewards as float64,
Discrete actions as Python ints, Box/MultiDiscrete actions `np.frombuffer(a, "<f4")
.astype(dtype).reshape(shape)`, and an ended episode's env reset with no seed.

Waiting: a worker spins on a non-blocking read (yielding the core between tries) for up to
SPIN_S after its last message (a step arrives every few tens of µs during a rollout, and a
sleeping process takes 20-50 µs to wake on a virtual machine), then blocks in select() until the
next one.
"""

import json
import os
import select
import signal
import struct
import sys
import time
import traceback

SPIN_S = 0.002


def write_all(fd, data):
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        view = view[n:]


def reply(fd, tag, payload=b""):
    write_all(fd, tag + struct.pack("<I", len(payload)) + payload)


class Reader:
    """Exact-length reads from a non-blocking fd: spin for SPIN_S, then block."""

    def __init__(self, fd):
        self.fd = fd
        os.set_blocking(fd, False)

    def read(self, n):
        parts, got = [], 0
        deadline = time.perf_counter() + SPIN_S
        while got < n:
            try:
                chunk = os.read(self.fd, n - got)
            except BlockingIOError:
                if time.perf_counter() > deadline:
                    select.select([self.fd], [], [])
                else:
                    os.sched_yield()  # the core to whoever else wants it (a busy machine)
                continue
            if not chunk:
                return None  # the parent closed the pipe
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)


class Envs:
    def __init__(self, cfg):
        import gymnasium as gym
        import numpy as np

        self.np = np
        self.id, self.first, self.k = cfg["id"], cfg["first"], cfg["k"]
        self.obs_shape, self.obs_dtype = tuple(cfg["obs_shape"]), cfg["obs_dtype"]
        self.act_shape, self.act_dtype = tuple(cfg["act_shape"]), cfg["act_dtype"]
        self.discrete, self.act_dim = cfg["discrete"], cfg["act_dim"]
        self.envs = []
        for _ in range(self.k):
            self.envs.append(gym.make(cfg["spec"]))
        # A Dict/Tuple observation crosses flattened (dict_obs.rs): Gymnasium's spaces.flatten.
        self.structured = cfg.get("structured", False)
        self.obs_space = self.envs[0].observation_space if self.envs else None
        self.flatten = flatten_checked  # dict_check.py, which the parent puts before this file
        # Masked envs (masks.rs): each env's action_masks(), found through its wrappers, read after
        # every reset and step and sent with the observations (mask_dim bytes per env, 1 = valid).
        self.mask_dim = cfg.get("mask_dim", 0)
        self.mask_fns = [self.find_masks(e) for e in self.envs] if self.mask_dim else []

    def find_masks(self, env):
        try:
            fn = env.get_wrapper_attr("action_masks")
        except AttributeError:
            fn = getattr(env, "action_masks", None)
        if not callable(fn):
            raise BridgeError(f"{self.id}: an env of this worker has no action_masks() method, unlike the first env")
        return fn

    def masks(self):
        """Every env's current mask as bytes, checked as masks.rs's read_masks checks one."""
        np, out = self.np, []
        for fn in self.mask_fns:
            try:
                m = fn()
            except Exception:
                raise BridgeError(f"{self.id}.action_masks() raised:\n{traceback.format_exc().rstrip()}")
            if m is None:
                raise BridgeError(f"{self.id}.action_masks() returned None; it must return one boolean per action "
                                  "(True = valid)")
            a = np.asarray(m)
            if a.size != self.mask_dim:
                raise BridgeError(f"{self.id}.action_masks() returned a mask of shape {list(a.shape)} ({a.size} values); "
                                  f"expected {self.mask_dim} (one per action, True = valid)")
            if not (a.dtype.kind == "b" or (a.dtype.kind in "iuf" and np.logical_or(a == 0, a == 1).all())):
                raise BridgeError(f"{self.id}.action_masks() returned a mask of dtype {a.dtype}; a mask is boolean "
                                  "(True = valid), or numbers that are all 0 or 1")
            out.append(a.astype(bool).tobytes())
        return b"".join(out)

    def observation(self, o):
        np = self.np
        if self.structured:
            try:
                o = self.flatten(self.obs_space, o)
            except Exception as e:
                raise BridgeError(f"{self.id} returned an observation that does not fit its observation_space "
                                  f"{self.obs_space}: {type(e).__name__}: {e}") from e
        arr = np.asarray(o)
        if arr.shape != self.obs_shape or arr.dtype.kind not in "fiub":
            raise BridgeError(
                f"{self.id} returned an observation of shape {list(arr.shape)} and dtype {arr.dtype}; "
                f"its observation_space declares shape {list(self.obs_shape)} (dtype {self.obs_dtype})"
            )
        return arr.astype("<f4").tobytes()

    def reward(self, r):
        if r is None:
            raise BridgeError(f"{self.id}.step returned the reward None, which is not one number")
        try:
            a = self.np.asarray(r).astype("float64")
            if a.size != 1:
                raise ValueError(f"{a.size} values")
            return a.item()
        except Exception as e:
            raise BridgeError(f"{self.id}.step returned the reward {r!r}, which is not one number ({e})")

    def reset_one(self, j, seed):
        try:
            out = self.envs[j].reset(seed=seed)
        except Exception:
            raise BridgeError(f"{self.id}.reset raised:\n{traceback.format_exc().rstrip()}")
        if not isinstance(out, tuple) or len(out) != 2:
            raise BridgeError(
                f"{self.id}.reset did not return (observation, info) (the old gym API returned the observation alone)"
            )
        return self.observation(out[0])

    def reset(self, seed):
        return b"".join(self.reset_one(j, seed + self.first + j) for j in range(self.k)) + self.masks()

    def action(self, buf, j):
        a = self.np.frombuffer(buf, "<f4", count=self.act_dim, offset=4 * self.act_dim * j)
        if self.discrete:
            return int(a[0])
        return a.astype(self.act_dtype).reshape(self.act_shape)

    def step(self, buf):
        obs, rewards, flags, finals = [], [], bytearray(self.k), []
        for j, env in enumerate(self.envs):
            try:
                out = env.step(self.action(buf, j))
            except Exception:
                raise BridgeError(f"{self.id}.step raised:\n{traceback.format_exc().rstrip()}")
            if not isinstance(out, tuple) or len(out) != 5:
                raise BridgeError(
                    f"{self.id}.step did not return (observation, reward, terminated, truncated, info) "
                    "(the old gym API returned 4 values with one `done`)"
                )
            o = self.observation(out[0])
            rewards.append(self.reward(out[1]))
            terminated, truncated = bool(out[2]), bool(out[3])
            flags[j] = int(terminated) | (int(truncated) << 1)
            if terminated or truncated:
                finals.append(o)
                o = self.reset_one(j, None)
            obs.append(o)
        return b"".join(obs) + struct.pack(f"<{self.k}d", *rewards) + bytes(flags) + self.masks() + b"".join(finals)

    def close(self):
        for env in self.envs:
            try:
                env.close()
            except Exception:
                pass


class BridgeError(Exception):
    pass


def serve(envs, reader, out):
    step_len = 4 * envs.k * envs.act_dim
    while True:
        tag = reader.read(1)
        if tag is None:
            return
        if tag == b"R":
            (seed,) = struct.unpack("<Q", reader.read(8))
            payload = envs.reset(seed)
        elif tag == b"S":
            payload = envs.step(reader.read(step_len))
        else:
            raise BridgeError(f"subproc worker: unknown message {tag!r}")
        reply(out, b"O", payload)


def die_with_parent():
    """Linux: be killed when the parent dies (PR_SET_PDEATHSIG), so that a worker stuck inside an
    env's step does not outlive a run that quit at once; elsewhere, end-of-file on stdin."""
    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except Exception:
        pass
    if os.getppid() != parent:  # the parent died before the call
        os._exit(1)


def main():
    # The parent decides when to stop (it saves, then closes this worker's stdin); this worker
    # runs in a process group of its own, and ignores a stray Ctrl-C too.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    cfg = json.loads(sys.argv[1])
    rin, out = os.dup(0), os.dup(1)
    os.dup2(2, 1)  # the env's prints go to stderr
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    reader = Reader(rin)
    envs = None
    try:
        envs = Envs(cfg)
        reply(out, b"O")
        serve(envs, reader, out)
    except BridgeError as e:
        reply(out, b"E", str(e).encode())
    except BaseException:
        reply(out, b"E", traceback.format_exc().rstrip().encode())
    finally:
        if envs is not None:
            envs.close()
    # After an error, wait for the parent to close the pipe (it reads the message first).
    while reader.read(1) is not None:
        pass


main()
