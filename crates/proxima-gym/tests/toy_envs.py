"""Small Gymnasium environments for the bridge's tests (imported as `toy_envs:toy/...`)."""
import os

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class BoxDiscrete(gym.Env):
    """Box(3,) observations in [-1, 1]; Discrete(2); reward 1 when the action is (obs[0] > 0)."""

    def __init__(self):
        self.observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return self.obs, {}

    def step(self, action):
        reward = float(int(action) == int(self.obs[0] > 0))
        self.obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return self.obs, reward, False, False, {}


class BoxBox(gym.Env):
    """Box(2,) observations; Box(-2, 2, (2,)) actions; reward -|a - obs|^2; terminates if |a| sums past 3.9."""

    def __init__(self):
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Box(-2.0, 2.0, (2,), np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.obs = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self.obs, {}

    def step(self, action):
        assert action.dtype == np.float32 and action.shape == (2,), (action.dtype, action.shape)
        reward = -float(np.sum((action - self.obs) ** 2))
        terminated = bool(np.sum(np.abs(action)) > 3.9)
        self.obs = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self.obs, reward, terminated, False, {}


class Raises(BoxDiscrete):
    def step(self, action):
        raise ValueError("boom from inside the env")


class WrongShape(BoxDiscrete):
    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, False, {}


class Prints(BoxDiscrete):
    """BoxDiscrete that prints to stdout at every step (a subproc worker must keep its pipe clean)."""

    def step(self, action):
        print("a line on stdout from inside the env")
        return super().step(action)


class DiesInWorker(BoxDiscrete):
    """Exits its process at the third step when that process is a child of the test's
    (`TOY_PARENT_PID`): a subproc worker that dies."""

    def step(self, action):
        self.t = getattr(self, "t", 0) + 1
        if self.t == 3 and str(os.getppid()) == os.environ.get("TOY_PARENT_PID"):
            os._exit(3)
        return super().step(action)


class RaisesInWorker(BoxDiscrete):
    """Raises in reset inside a subproc worker (a child of the test, `TOY_PARENT_PID`) only."""

    def reset(self, seed=None, options=None):
        if str(os.getppid()) == os.environ.get("TOY_PARENT_PID"):
            raise RuntimeError("only in a worker")
        return super().reset(seed=seed, options=options)


class DictAction(BoxDiscrete):
    def __init__(self):
        super().__init__()
        self.action_space = spaces.Dict({"a": spaces.Discrete(2)})


class Renders(BoxDiscrete):
    """Draws a 6x4 frame whose red channel is the step count and whose green channel is obs[0] > 0."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}

    def __init__(self, render_mode=None):
        super().__init__()
        self.render_mode = render_mode
        self.t = 0

    def reset(self, seed=None, options=None):
        self.t = 0
        return super().reset(seed=seed)

    def step(self, action):
        self.t += 1
        return super().step(action)

    def render(self):
        frame = np.zeros((4, 6, 3), np.uint8)
        frame[..., 0] = self.t
        frame[..., 1] = 255 * int(self.obs[0] > 0)
        return frame


class RendersGray(Renders):
    def render(self):
        return np.zeros((4, 6), np.uint8)


class RendersNone(Renders):
    def render(self):
        return None


class AtariLike(gym.Env):
    """A stand-in for an ALE game (the Atari wrappers' bad-input tests): 210x160 RGB frames, NOOP
    and RIGHT, 3 lives; from raw frame `bad_frame_at` on, `step` returns a frame of another shape."""

    bad_frame_at = 5
    frame_shape = (210, 160, 3)

    def __init__(self, frameskip=1, repeat_action_probability=0.0, full_action_space=False):
        self.observation_space = spaces.Box(0, 255, self.frame_shape, np.uint8)
        self.action_space = spaces.Discrete(2)
        self.ale = self  # ALE's `env.unwrapped.ale.lives()`
        self.t = 0

    def get_action_meanings(self):
        return ["NOOP", "RIGHT"]

    def lives(self):
        return 3

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(self.frame_shape, np.uint8), {}

    def step(self, action):
        self.t += 1
        shape = (200, 160, 3) if self.t >= self.bad_frame_at else self.frame_shape
        return np.full(shape, self.t % 256, np.uint8), 0.0, False, False, {}


class AtariLikeGray(AtariLike):
    frame_shape = (210, 160)


class PickOfTwo(gym.Env):
    """Invalid-action masking's test game ("pick one of two"): at each step two of six actions are
    valid, drawn by the env and not observed; the observation (+1 or -1) says which of the two
    pays 1 (the higher at +1, the lower at -1), the other pays 0. A masked action pays -1 and ends
    the episode (`strict`: raises, so a test sees any masked action taken). 16 steps: the best
    return is 16, masked random play scores 8, and play that ignores the masks is ended within a
    step or two. `action_masks()` is sb3-contrib's method: True = valid."""

    def __init__(self, strict=False):
        self.observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = spaces.Discrete(6)
        self.strict = strict
        self.valid, self.higher = (0, 1), False

    def _draw(self):
        a, b = (int(x) for x in self.np_random.choice(6, 2, replace=False))
        self.valid, self.higher = (min(a, b), max(a, b)), bool(self.np_random.integers(2))
        return np.array([1.0 if self.higher else -1.0], np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._draw(), {}

    def step(self, action):
        a = int(action)
        if a not in self.valid:
            if self.strict:
                raise ValueError(f"masked action {a} taken (valid: {self.valid})")
            return self._draw(), -1.0, True, False, {}
        reward = float(a == self.valid[int(self.higher)])
        return self._draw(), reward, False, False, {}

    def valid_actions(self):
        mask = np.zeros(6, dtype=bool)
        mask[list(self.valid)] = True
        return mask

    def action_masks(self):
        return self.valid_actions()


class PickOfTwoStrict(PickOfTwo):
    def __init__(self):
        super().__init__(strict=True)


class PickOfTwoIntMask(PickOfTwoStrict):
    """Masks as int8 0/1 (boolean-like: accepted, as sb3-contrib accepts them)."""

    def action_masks(self):
        return self.valid_actions().astype(np.int8)


class PickOfTwoBadShape(PickOfTwo):
    def action_masks(self):
        return self.valid_actions()[:5]


class PickOfTwoNoValid(PickOfTwo):
    def action_masks(self):
        return np.zeros(6, dtype=bool)


class PickOfTwoStrMask(PickOfTwo):
    def action_masks(self):
        return np.array(["yes" if v else "no" for v in self.valid_actions()])


class PickOfTwoTwos(PickOfTwo):
    def action_masks(self):
        return self.valid_actions() * 2.0


class PickOfTwoNoMethod(PickOfTwoStrict):
    """The game without an `action_masks` method: the masks come from sb3-contrib's ActionMasker."""

    action_masks = None


def pick_of_two_masker():
    """PickOfTwoStrict's game behind sb3-contrib's own `ActionMasker` wrapper (its masks found
    through the wrapper, as sb3-contrib's `get_action_masks` finds them)."""
    from sb3_contrib.common.wrappers import ActionMasker

    return ActionMasker(PickOfTwoNoMethod(), lambda env: env.unwrapped.valid_actions())


class KeyDecides(gym.Env):
    """Dict observations (SB3's MultiInputPolicy): a `cue` key (Discrete(3)) says which of three actions
    pays 1; the other keys — a Box of noise, a nested Dict and a Tuple — say nothing. 10 steps: best return 10,
    random play 3.3."""

    def __init__(self):
        self.observation_space = spaces.Dict({
            "cue": spaces.Discrete(3),
            "noise": spaces.Box(-1.0, 1.0, (4,), np.float32),
            "nested": spaces.Dict({"level": spaces.Box(0.0, 5.0, (2,), np.float32), "flag": spaces.MultiBinary(2)}),
            "pair": spaces.Tuple((spaces.Discrete(2), spaces.MultiDiscrete([2, 3]))),
        })
        self.action_space = spaces.Discrete(3)

    def _obs(self):
        self.cue = int(self.np_random.integers(3))
        o = self.observation_space.sample()
        o["cue"] = self.cue
        return o

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        return self._obs(), {}

    def step(self, action):
        reward = float(int(action) == self.cue)
        return self._obs(), reward, False, False, {}


class CartPoleNoVel(gym.Wrapper):
    """CartPole-v1 with the velocities hidden (observation: cart position and pole angle only), the
    usual check of a recurrent policy (rl-zoo's CartPoleNoVel-v1): a memoryless policy cannot
    balance the pole for long; one that infers the velocities can."""

    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        full = self.env.observation_space
        self.observation_space = spaces.Box(full.low[[0, 2]], full.high[[0, 2]], dtype=np.float32)

    def reset(self, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return obs[[0, 2]], info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs[[0, 2]], reward, terminated, truncated, info


gym.register("toy/CartPoleNoVel-v1", entry_point=CartPoleNoVel)


class Cue(gym.Env):
    """A memory task no memoryless policy can solve: the first observation shows a cue (+1 or -1) and
    a flag; the next three show nothing; the fifth asks (flag -1), and the action then pays +1 if it
    names the cue (1 for +1, 0 for -1), -1 otherwise. Memoryless play scores 0 in expectation,
    remembering scores 1."""

    DELAY = 3

    def __init__(self):
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)

    def _obs(self):
        if self.t == 0:
            return np.array([1.0 if self.cue else -1.0, 1.0], np.float32)
        return np.array([0.0, -1.0 if self.t == self.DELAY + 1 else 0.0], np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.cue, self.t = bool(self.np_random.integers(2)), 0
        return self._obs(), {}

    def step(self, action):
        answer = self.t == self.DELAY + 1
        reward = (1.0 if (int(action) == 1) == self.cue else -1.0) if answer else 0.0
        self.t += 1
        return self._obs(), reward, answer, False, {}


gym.register("toy/Cue-v0", entry_point=Cue)


class MaskedCueDict(gym.Env):
    """Masking, memory and Dict observations at once: a Dict observation {"cue": Discrete(3), "ask":
    MultiBinary(1)} shows a cue (1 or 2) at the first step only (0 afterwards); three steps later "ask"
    is set and only actions 0 and 1 are valid (the answer: 0 for cue 1, 1 for cue 2; +1 if right, -1 if
    wrong); before that only action 3 ("wait") is valid. A masked action raises. Memoryless play scores 0,
    remembering scores 1."""

    def __init__(self):
        self.observation_space = spaces.Dict({"cue": spaces.Discrete(3), "ask": spaces.MultiBinary(1)})
        self.action_space = spaces.Discrete(4)

    def _obs(self):
        return {"cue": self.cue if self.t == 0 else 0, "ask": np.array([int(self.t == 4)], np.int8)}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.cue, self.t = int(self.np_random.integers(1, 3)), 0
        return self._obs(), {}

    def action_masks(self):
        return np.array([True, True, False, False]) if self.t == 4 else np.array([False, False, False, True])

    def step(self, action):
        a = int(action)
        if not self.action_masks()[a]:
            raise ValueError(f"masked action {a} taken at step {self.t}")
        answer = self.t == 4
        reward = (1.0 if a == self.cue - 1 else -1.0) if answer else 0.0
        self.t += 1
        return self._obs(), reward, answer, False, {}


gym.register("toy/MaskedCueDict-v0", entry_point=MaskedCueDict, disable_env_checker=True)


class KeyDecidesFlat(KeyDecides):
    """KeyDecides without the nested Dict and the Tuple, which SB3 does not take (its side-by-side bench)."""

    def __init__(self):
        super().__init__()
        self.observation_space = spaces.Dict({
            "cue": spaces.Discrete(3),
            "noise": spaces.Box(-1.0, 1.0, (4,), np.float32),
            "level": spaces.Box(0.0, 5.0, (2,), np.float32),
        })


class KeyMissing(KeyDecides):
    """Observations without the `cue` key its space declares."""

    def _obs(self):
        o = super()._obs()
        del o["cue"]
        return o


class ImageKey(KeyDecides):
    def __init__(self):
        super().__init__()
        self.observation_space = spaces.Dict({"cue": spaces.Discrete(3), "screen": spaces.Box(0, 255, (8, 8, 3), np.uint8)})


class KeyShapes(KeyDecides):
    """Two Box keys whose values come in each other's shapes (5 values in all, as the space's): Gymnasium's
    flattening alone would read them shifted; the bridge refuses them."""

    def __init__(self):
        super().__init__()
        self.observation_space = spaces.Dict({"a": spaces.Box(-1.0, 1.0, (2,), np.float32),
                                              "b": spaces.Box(-1.0, 1.0, (3,), np.float32)})

    def _obs(self):
        self.cue = 0
        return {"a": np.zeros(3, np.float32), "b": np.zeros(2, np.float32)}


class ImageNested(KeyDecides):
    """An image key inside a nested Dict, which MultiInputPolicy's CNN does not read."""

    def __init__(self):
        super().__init__()
        screen = spaces.Box(0, 255, (36, 36, 1), np.uint8)
        self.observation_space = spaces.Dict({"cue": spaces.Discrete(3), "inner": spaces.Dict({"screen": screen})})


class ImageDecides(gym.Env):
    """Dict observations with an image key, as SB3's MultiInputPolicy reads them with a CNN per image: the
    `screen` key (36 x 36 x 1 uint8, channel-last) lights the left, middle or right third of the frame, and the
    action naming that third pays 1; the `noise` key (a Box) says nothing. 10 steps: best 10, random 3.3."""

    def __init__(self):
        self.observation_space = spaces.Dict({
            "noise": spaces.Box(-1.0, 1.0, (2,), np.float32),
            "screen": spaces.Box(0, 255, (36, 36, 1), np.uint8),
        })
        self.action_space = spaces.Discrete(3)

    def _obs(self):
        self.third = int(self.np_random.integers(3))
        screen = np.zeros((36, 36, 1), np.uint8)
        screen[8:28, 12 * self.third:12 * self.third + 12] = 255
        return {"noise": self.np_random.uniform(-1, 1, 2).astype(np.float32), "screen": screen}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        reward = float(int(action) == self.third)
        return self._obs(), reward, False, False, {}


class ImageSteer(gym.Env):
    """ImageDecides with a continuous action (SAC, TD3, DDPG, TQC): the `screen` key (36 x 36 x 1 uint8,
    channel-last) lights its left or right half, and the action a in [-1, 1] pays -(a - t)^2 for t = -0.6 (left)
    or +0.6 (right); the `noise` key says nothing. 10 steps: best 0, a = 0 always -3.6."""

    def __init__(self):
        self.observation_space = spaces.Dict({
            "noise": spaces.Box(-1.0, 1.0, (2,), np.float32),
            "screen": spaces.Box(0, 255, (36, 36, 1), np.uint8),
        })
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def _obs(self):
        self.side = int(self.np_random.integers(2))
        screen = np.zeros((36, 36, 1), np.uint8)
        screen[8:28, 18 * self.side:18 * self.side + 18] = 255
        return {"noise": self.np_random.uniform(-1, 1, 2).astype(np.float32), "screen": screen}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        target = 0.6 if self.side else -0.6
        reward = -float((float(np.asarray(action).reshape(-1)[0]) - target) ** 2)
        return self._obs(), reward, False, False, {}


class ChannelLast(ImageDecides):
    """ImageDecides's screen alone: a channel-last (36, 36, 1) uint8 image, as SB3's image envs give them."""

    def __init__(self):
        super().__init__()
        self.observation_space = self.observation_space["screen"]

    def _obs(self):
        return super()._obs()["screen"]


for name, cls in [("KeyDecides", KeyDecides), ("KeyDecidesFlat", KeyDecidesFlat), ("KeyMissing", KeyMissing), ("ImageKey", ImageKey),
                  ("ImageNested", ImageNested), ("ImageDecides", ImageDecides), ("ImageSteer", ImageSteer), ("KeyShapes", KeyShapes), ("ChannelLast", ChannelLast)]:
    # Without Gymnasium's env checker, so that the bridge's own check of a missing key is what runs.
    gym.register(f"toy/{name}-v0", entry_point=cls, max_episode_steps=10, disable_env_checker=True)

for name, entry in [("PickOfTwo", PickOfTwo), ("PickOfTwoStrict", PickOfTwoStrict), ("PickOfTwoIntMask", PickOfTwoIntMask), ("PickOfTwoBadShape", PickOfTwoBadShape), ("PickOfTwoNoValid", PickOfTwoNoValid), ("PickOfTwoStrMask", PickOfTwoStrMask), ("PickOfTwoTwos", PickOfTwoTwos), ("PickOfTwoMasker", pick_of_two_masker)]:
    gym.register(f"toy/{name}-v0", entry_point=entry, max_episode_steps=16)

for name, cls in [("AtariLike", AtariLike), ("AtariLikeGray", AtariLikeGray)]:
    gym.register(f"toy/{name}-v0", entry_point=cls, disable_env_checker=True)

for name, cls in [("BoxDiscrete", BoxDiscrete), ("BoxBox", BoxBox), ("Raises", Raises), ("WrongShape", WrongShape), ("DictAction", DictAction), ("Prints", Prints), ("DiesInWorker", DiesInWorker), ("RaisesInWorker", RaisesInWorker), ("Renders", Renders), ("RendersGray", RendersGray), ("RendersNone", RendersNone)]:
    gym.register(f"toy/{name}-v0", entry_point=cls, max_episode_steps=10)
