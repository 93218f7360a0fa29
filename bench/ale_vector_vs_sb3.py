"""Does ale-py's own C++ vector env (`ale_py.vector_env.AtariVectorEnv`, ale-py >= 0.11) preprocess as
Stable-Baselines3's AtariWrapper does? One Breakout env each, the same settings (no noops, frame skip
4 with the max of the last two frames, 84 x 84 grayscale, fire on reset, no life-loss ends, rewards
unclipped), the same 400 random actions: prints how many pixels differ after reset and over the
steps, and the rewards; then ALE's own grayscale against cv2's RGB2GRAY on the same raw frames.
Usage: python bench/ale_vector_vs_sb3.py (needs gymnasium, ale-py, stable-baselines3, opencv)."""
import cv2
import gymnasium as gym
import numpy as np
import ale_py
from ale_py import ALEInterface, roms
from ale_py.vector_env import AtariVectorEnv
from stable_baselines3.common.atari_wrappers import AtariWrapper

gym.register_envs(ale_py)
sb = AtariWrapper(gym.make("BreakoutNoFrameskip-v4"), noop_max=0, frame_skip=4, screen_size=84,
                  terminal_on_life_loss=False, clip_reward=False)
vec = AtariVectorEnv("breakout", 1, num_threads=1, noop_max=0, episodic_life=False, reward_clipping=False,
                     use_fire_reset=True, stack_num=1, frameskip=4, maxpool=True, grayscale=True,
                     img_height=84, img_width=84, autoreset_mode="SameStep")
o_sb, _ = sb.reset(seed=1)
o_v, _ = vec.reset(seed=1)
d = np.abs(o_sb[..., 0].astype(int) - o_v[0, 0].astype(int))
print(f"after reset: max |diff| {d.max()}, {(d > 0).sum()} of {d.size} pixels differ")
rng = np.random.default_rng(0)
worst, ndiff, r_sb, r_v, t = 0, 0, 0.0, 0.0, 0
for t in range(400):
    a = int(rng.integers(4))
    o_sb, rs, term_sb, _, _ = sb.step(a)
    o_v, rv, term_v, _, _ = vec.step(np.array([a]))
    d = np.abs(o_sb[..., 0].astype(int) - o_v[0, 0].astype(int))
    worst, ndiff, r_sb, r_v = max(worst, int(d.max())), ndiff + int((d > 0).sum()), r_sb + rs, r_v + float(rv[0])
    if term_sb or term_v[0]:
        print(f"an episode ended at step {t}: SB3 {bool(term_sb)}, AtariVectorEnv {bool(term_v[0])}")
        break
print(f"{t + 1} steps: max |diff| {worst}, {ndiff} of {(t + 1) * 84 * 84} pixels differ; rewards SB3 {r_sb}, "
      f"AtariVectorEnv {r_v}")

ale = ALEInterface()
ale.setInt("random_seed", 1)
ale.loadROM(roms.get_rom_path("breakout"))
worst = 0
for _ in range(300):
    ale.act(int(rng.integers(4)))
    g = np.abs(ale.getScreenGrayscale().astype(int) - cv2.cvtColor(ale.getScreenRGB(), cv2.COLOR_RGB2GRAY).astype(int))
    worst = max(worst, int(g.max()))
    if ale.game_over():
        ale.reset_game()
print(f"ALE's grayscale against cv2's RGB2GRAY on 300 raw frames: max |diff| {worst}")
