//! The Atari wrapper stack of Stable-Baselines3's `AtariWrapper` (+ `VecFrameStack`), in Rust,
//! over any [`AtariGame`] (an ALE game bridged from Python, or a scripted one in tests):
//!
//! 1. **NoopReset** (`noop_max`, 30): after a reset, 1..=`noop_max` no-op frames, the count drawn
//!    from the game's own RNG (`env.unwrapped.np_random.integers(1, noop_max + 1)` in SB3).
//! 2. **MaxAndSkip** (`frame_skip`, 4): the action repeated `frame_skip` frames, rewards summed,
//!    the observation the pixel-wise max of the last two frames (kept from step to step, as SB3's
//!    `_obs_buffer`: a step cut short by the game's end maxes with older frames).
//! 3. **EpisodicLife** (`terminal_on_life_loss`, true): a lost life is `terminated`; the next
//!    reset then takes one no-op step instead of resetting the game, until the real game over.
//! 4. **FireReset**, for games whose action 1 is `FIRE` (and that have ≥ 3 actions): each
//!    reset then presses FIRE (1) and then action 2.
//! 5. **WarpFrame** (`screen_size`, 84): grayscale and INTER_AREA resize, exact to OpenCV
//!    ([`super::frame`]).
//! 6. **ClipReward** (`clip_reward`, true): the reward's sign.
//! 7. **FrameStack** (`frame_stack`, 4), as SB3's `VecFrameStack`: the last `frame_stack` frames,
//!    oldest first, zeros before an episode's first frame. The layout is channel-first,
//!    `[frame_stack, screen_size, screen_size]` (SB3 stacks channel-last and transposes before its
//!    CNN, `VecTransposeImage`).
//!
//! The wrapped game reports the real game in its info: `lives` and `game_over` (1 when the game
//! itself ended, 0 otherwise — a lost life included) on every step, and at a game over (the game's own `terminated` or `truncated`, not a lost life) `game_score` (the sum of
//! the unclipped rewards over all lives) and `game_frames` (raw frames, no-ops included) —
//! what SB3's `Monitor`, wrapped inside `AtariWrapper`, records as the episode.

use super::frame::{max_frames, rgb_to_gray, AreaResize};
use crate::error::{EnvError, Result};
use crate::Info;

/// The most frames `frame_stack` takes (SB3 has no bound; 4 is the paper's, and a stack of 100,000
/// 84 × 84 frames would ask for gigabytes per env before the first step).
pub const MAX_FRAME_STACK: usize = 64;
/// Largest `noop_max` accepted: no-op frames after a reset (100,000 frames are 28 minutes of play).
pub const MAX_NOOP_MAX: usize = 100_000;
/// Largest `frame_skip` accepted: frames emulated per step.
pub const MAX_FRAME_SKIP: usize = 1_000;

/// One raw frame step of an [`AtariGame`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GameStep {
    /// The frame's reward (the game's score change).
    pub reward: f64,
    /// Game over.
    pub terminated: bool,
    /// Cut short (ALE's frame limit, a time limit).
    pub truncated: bool,
}

/// An Atari game stepped one raw frame at a time (ALE with `frameskip = 1`), frames as RGB.
pub trait AtariGame: Send {
    /// The game's id, for messages.
    fn id(&self) -> &str;
    /// `(height, width)` of its RGB frames (210 × 160 for the ALE).
    fn frame_shape(&self) -> (usize, usize);
    /// `get_action_meanings()`: `"NOOP"`, `"FIRE"`, … for each action.
    fn action_meanings(&self) -> Vec<String>;
    /// Resets the game (`Some(seed)` reseeds it) and writes the first frame into `rgb`
    /// (`[height, width, 3]` u8).
    fn reset(&mut self, seed: Option<u64>, rgb: &mut [u8]) -> Result<()>;
    /// One raw frame with `action`, its frame written into `rgb`.
    fn step(&mut self, action: usize, rgb: &mut [u8]) -> Result<GameStep>;
    /// One raw frame with `action` whose frame no one looks at (MaxAndSkip's first frames):
    /// a game that can step without reading out its frame does so here. By default a
    /// [`AtariGame::step`] into a scratch frame.
    fn step_unseen(&mut self, action: usize) -> Result<GameStep> {
        let (h, w) = self.frame_shape();
        self.step(action, &mut vec![0; h * w * 3])
    }
    /// The game's current frame into `rgb` (`[height, width, 3]` u8): the frame of the last
    /// step or reset, also after [`AtariGame::step_unseen`].
    fn screen(&mut self, rgb: &mut [u8]) -> Result<()>;
    /// The lives left (`ale.lives()`).
    fn lives(&self) -> Result<u32>;
    /// A no-op count in `1..=noop_max` from the game's own RNG (SB3's `NoopResetEnv`).
    fn noop_count(&mut self, noop_max: usize) -> Result<usize>;
}

/// The wrapper stack's settings, with SB3's names and `AtariWrapper`'s defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct AtariOptions {
    /// At most this many no-op frames after a reset (0: none).
    pub noop_max: usize,
    /// Frames per agent step (1: no skipping and no max-pooling).
    pub frame_skip: usize,
    /// Side of the square grayscale observation.
    pub screen_size: usize,
    /// A lost life ends the agent's episode (not the game).
    pub terminal_on_life_loss: bool,
    /// Rewards become their sign.
    pub clip_reward: bool,
    /// Frames stacked per observation (1: none).
    pub frame_stack: usize,
    /// Sticky actions: the probability that the game repeats the previous action instead of
    /// the chosen one (the game maker's setting, ALE's `repeat_action_probability`). 0, as
    /// SB3's and CleanRL's `NoFrameskip-v4` games and the PPO paper; Machado et al. 2018
    /// recommend 0.25 (the `-v5` games' default).
    pub repeat_action_probability: f64,
}

impl AtariOptions {
    /// The settings' own limits (a frame size aside): `Err` with the message of the first one
    /// broken, naming the option.
    pub fn check(&self) -> std::result::Result<(), String> {
        for (k, v) in
            [("frame_skip", self.frame_skip), ("screen_size", self.screen_size), ("frame_stack", self.frame_stack)]
        {
            if v == 0 {
                return Err(format!("{k} = 0: must be at least 1"));
            }
        }
        if self.noop_max > MAX_NOOP_MAX {
            return Err(format!(
                "noop_max = {}: at most {MAX_NOOP_MAX} (SB3's is 30; every reset emulates that many no-op frames)",
                self.noop_max
            ));
        }
        if self.frame_skip > MAX_FRAME_SKIP {
            return Err(format!(
                "frame_skip = {}: at most {MAX_FRAME_SKIP} (SB3's is 4; every step emulates that many frames)",
                self.frame_skip
            ));
        }
        if self.frame_stack > MAX_FRAME_STACK {
            return Err(format!(
                "frame_stack = {}: at most {MAX_FRAME_STACK} (each stacked frame is another screen_size² bytes per env and step of a rollout)",
                self.frame_stack
            ));
        }
        Ok(())
    }

    /// Whether `screen_size` fits frames of `(height, width)`: `Err` naming the option when the
    /// resize cannot make it (larger than the frame's smaller side, or a whole-factor shrink on
    /// both sides: [`AreaResize::new`]).
    pub fn check_frame(&self, (h, w): (usize, usize)) -> std::result::Result<(), String> {
        let s = self.screen_size;
        if s > h.min(w) {
            return Err(format!(
                "screen_size = {s}: at most {} (the game's frames are {h}×{w}, and they are only shrunk here)",
                h.min(w)
            ));
        }
        AreaResize::new(h, w, s, s).map(|_| ()).map_err(|e| match e {
            EnvError::InvalidArgument(m) => format!("screen_size = {s}: {m}"),
            other => format!("screen_size = {s}: {other}"),
        })
    }
}

impl Default for AtariOptions {
    fn default() -> Self {
        AtariOptions {
            noop_max: 30,
            frame_skip: 4,
            screen_size: 84,
            terminal_on_life_loss: true,
            clip_reward: true,
            frame_stack: 4,
            repeat_action_probability: 0.0,
        }
    }
}

/// What one agent step of [`AtariWrapper`] returns (its observation is [`AtariWrapper::observation`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AtariStep {
    /// The (clipped, if `clip_reward`) sum of the skipped frames' rewards.
    pub reward: f64,
    /// Game over, or a lost life under `terminal_on_life_loss`.
    pub terminated: bool,
    /// The game was cut short.
    pub truncated: bool,
    /// `lives`; at a game over also `game_score` and `game_frames` (module docs).
    pub info: Info,
}

/// The game's raw frames, and what MaxAndSkip keeps between steps.
struct RawFrames {
    /// The frame the last raw step or reset wrote.
    current: Vec<u8>,
    /// MaxAndSkip's `_obs_buffer`: the second-to-last and last frames of a skip.
    pair: [Vec<u8>; 2],
    /// The frame WarpFrame reads (the max of `pair` after a step, `current` after a reset).
    seen: Vec<u8>,
}

/// SB3's `AtariWrapper` and `VecFrameStack` over an [`AtariGame`] (module docs).
pub struct AtariWrapper<G: AtariGame> {
    game: G,
    opts: AtariOptions,
    fire_reset: bool,
    raw: RawFrames,
    gray: Vec<u8>,
    resize: AreaResize,
    /// `[frame_stack, screen_size, screen_size]`, oldest frame first.
    stack: Vec<u8>,
    /// EpisodicLife's state: lives at the last step, and whether that step ended the game.
    lives: u32,
    was_real_done: bool,
    score: f64,
    frames: u64,
}

impl<G: AtariGame> AtariWrapper<G> {
    /// Wraps `game`.
    ///
    /// # Errors
    /// `InvalidArgument` for `frame_skip`, `screen_size` or `frame_stack` of 0, `noop_max`,
    /// `frame_skip` or `frame_stack` above [`MAX_NOOP_MAX`], [`MAX_FRAME_SKIP`], [`MAX_FRAME_STACK`], a screen larger
    /// than the game's frame (or a whole-factor shrink on both sides, see [`AreaResize::new`]),
    /// or a game whose action 0 is not `NOOP` while `noop_max > 0`.
    pub fn new(game: G, opts: AtariOptions) -> Result<AtariWrapper<G>> {
        let bad = |m: String| Err(EnvError::InvalidArgument(format!("{}: {m}", game.id())));
        if let Err(m) = opts.check() {
            return bad(m);
        }
        let meanings = game.action_meanings();
        if opts.noop_max > 0 && meanings.first().map(String::as_str) != Some("NOOP") {
            return bad(format!(
                "noop_max = {} needs action 0 to be NOOP; the game's actions are {meanings:?}",
                opts.noop_max
            ));
        }
        let fire_reset = meanings.iter().any(|m| m == "FIRE");
        if fire_reset && (meanings.get(1).map(String::as_str) != Some("FIRE") || meanings.len() < 3) {
            return bad(format!(
                "FireReset needs action 1 to be FIRE and at least 3 actions; the game's actions are {meanings:?}"
            ));
        }
        let (h, w) = game.frame_shape();
        if let Err(m) = opts.check_frame((h, w)) {
            return bad(m);
        }
        let resize = AreaResize::new(h, w, opts.screen_size, opts.screen_size)?;
        let side = opts.screen_size;
        let frame = vec![0u8; h * w * 3];
        Ok(AtariWrapper {
            raw: RawFrames { current: frame.clone(), pair: [frame.clone(), frame.clone()], seen: frame },
            gray: vec![0; h * w],
            resize,
            stack: vec![0; opts.frame_stack * side * side],
            game,
            opts,
            fire_reset,
            lives: 0,
            was_real_done: true,
            score: 0.0,
            frames: 0,
        })
    }

    /// The stacked observation, `[frame_stack, screen_size, screen_size]` u8, oldest first.
    pub fn observation(&self) -> &[u8] {
        &self.stack
    }

    /// The observation's shape `[frame_stack, screen_size, screen_size]`.
    pub fn observation_shape(&self) -> [usize; 3] {
        [self.opts.frame_stack, self.opts.screen_size, self.opts.screen_size]
    }

    /// The wrapped game.
    pub fn game(&self) -> &G {
        &self.game
    }

    /// The settings it was built with.
    pub fn options(&self) -> &AtariOptions {
        &self.opts
    }

    /// The game's last raw RGB frame, `[height, width, 3]`.
    pub fn raw_frame(&self) -> &[u8] {
        &self.raw.current
    }

    /// Whether the last step ended the game itself (not only a life), or no step was taken.
    pub fn game_over(&self) -> bool {
        self.was_real_done
    }

    /// Starts the agent's next episode (after a lost life under `terminal_on_life_loss`, the
    /// game goes on: see the module docs); the stack holds zeros and the first frame.
    ///
    /// # Errors
    /// The game's errors.
    pub fn reset(&mut self, seed: Option<u64>) -> Result<&[u8]> {
        self.life_reset(seed)?;
        if self.fire_reset {
            // FireResetEnv: FIRE, then action 2, each through EpisodicLife's step; it returns
            // the observation of the second even when a reset follows it.
            for action in [1, 2] {
                let (s, _) = self.life_step(action)?;
                if s.terminated || s.truncated {
                    let kept = (action == 2).then(|| self.raw.seen.clone());
                    self.life_reset(seed)?;
                    if let Some(k) = kept {
                        self.raw.seen = k;
                    }
                }
            }
        }
        self.stack.fill(0);
        self.push_frame()?;
        Ok(&self.stack)
    }

    /// One agent step: `action` for `frame_skip` frames.
    ///
    /// # Errors
    /// The game's errors (an action out of range among them).
    pub fn step(&mut self, action: usize) -> Result<AtariStep> {
        let (s, lives) = self.life_step(action)?;
        let mut info =
            Info { values: vec![("lives", lives as f64), ("game_over", f64::from(u8::from(self.was_real_done)))] };
        if self.was_real_done {
            info.values.push(("game_score", self.score));
            info.values.push(("game_frames", self.frames as f64));
        }
        let reward = if self.opts.clip_reward { sign(s.reward) } else { s.reward };
        let n = self.frame_len();
        self.stack.copy_within(n.., 0);
        self.push_frame()?;
        Ok(AtariStep { reward, terminated: s.terminated, truncated: s.truncated, info })
    }

    fn frame_len(&self) -> usize {
        self.opts.screen_size * self.opts.screen_size
    }

    /// EpisodicLife's step over MaxAndSkip's: a lost life (lives falling, still above 0) is
    /// `terminated` under `terminal_on_life_loss`. Returns the step and the lives left.
    fn life_step(&mut self, action: usize) -> Result<(GameStep, u32)> {
        let mut s = self.skip_step(action)?;
        self.was_real_done = s.terminated || s.truncated;
        let lives = self.game.lives()?;
        if self.opts.terminal_on_life_loss && 0 < lives && lives < self.lives {
            s.terminated = true;
        }
        self.lives = lives;
        Ok((s, lives))
    }

    /// EpisodicLife's reset: the game's (NoopReset's) after a game over, else one no-op step.
    fn life_reset(&mut self, seed: Option<u64>) -> Result<()> {
        if !self.opts.terminal_on_life_loss || self.was_real_done {
            self.noop_reset(seed)?;
        } else {
            let s = self.skip_step(0)?;
            if s.terminated || s.truncated {
                self.noop_reset(seed)?;
            }
        }
        self.lives = self.game.lives()?;
        Ok(())
    }

    /// NoopReset's reset: the game's, then 1..=`noop_max` raw no-op frames.
    fn noop_reset(&mut self, seed: Option<u64>) -> Result<()> {
        self.game_reset(seed)?;
        let noops = if self.opts.noop_max > 0 { self.game.noop_count(self.opts.noop_max)? } else { 0 };
        for k in 0..noops {
            let s = self.raw_step(0, k + 1 == noops)?;
            if s.terminated || s.truncated {
                self.game_reset(seed)?;
            }
        }
        self.raw.seen.copy_from_slice(&self.raw.current);
        Ok(())
    }

    fn game_reset(&mut self, seed: Option<u64>) -> Result<()> {
        self.game.reset(seed, &mut self.raw.current)?;
        self.score = 0.0;
        self.frames = 0;
        Ok(())
    }

    /// One raw frame; its frame is read into `raw.current` only when `seen` (else `current` is
    /// stale until the next read).
    fn raw_step(&mut self, action: usize, seen: bool) -> Result<GameStep> {
        let s = if seen { self.game.step(action, &mut self.raw.current)? } else { self.game.step_unseen(action)? };
        self.score += s.reward;
        self.frames += 1;
        Ok(s)
    }

    /// MaxAndSkip's step: `frame_skip` raw frames (fewer at the game's end), rewards summed.
    /// Only the last two frames are max-pooled, so the ones before them are not read out (a
    /// game ending there has its frame read, for [`AtariWrapper::raw_frame`]).
    fn skip_step(&mut self, action: usize) -> Result<GameStep> {
        let skip = self.opts.frame_skip;
        let mut total = GameStep::default();
        for i in 0..skip {
            let seen = i + 2 >= skip;
            let s = self.raw_step(action, seen)?;
            if skip >= 2 && i == skip - 2 {
                self.raw.pair[0].copy_from_slice(&self.raw.current);
            }
            if i == skip - 1 {
                self.raw.pair[1].copy_from_slice(&self.raw.current);
            }
            total = GameStep { reward: total.reward + s.reward, terminated: s.terminated, truncated: s.truncated };
            if s.terminated || s.truncated {
                if !seen {
                    self.game.screen(&mut self.raw.current)?;
                }
                break;
            }
        }
        if skip == 1 {
            self.raw.seen.copy_from_slice(&self.raw.current);
        } else {
            let [a, b] = &self.raw.pair;
            max_frames(a, b, &mut self.raw.seen)?;
        }
        Ok(total)
    }

    /// WarpFrame of the frame seen last, into the stack's newest slot.
    fn push_frame(&mut self) -> Result<()> {
        rgb_to_gray(&self.raw.seen, &mut self.gray)?;
        let n = self.frame_len();
        let at = self.stack.len() - n;
        self.resize.apply(&self.gray, &mut self.stack[at..])
    }
}

/// `np.sign`: −1, 0 or 1 (0 for NaN, which no game reward is).
fn sign(r: f64) -> f64 {
    if r > 0.0 {
        1.0
    } else if r < 0.0 {
        -1.0
    } else {
        0.0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A scripted game: frame `t` (counted from its reset) is filled with `t·5 + action` plus a
    /// column gradient, and odd frames draw a flickering bright sprite on every 7th pixel; a reward of `t` on every 3rd frame; lives 3 → 2 → 1 → 0 at frames
    /// `life_every`, 2·…, 3·…, game over with the last one. It records the actions and resets.
    pub(crate) struct Scripted {
        meanings: Vec<String>,
        t: u64,
        life_every: u64,
        actions: Vec<usize>,
        resets: usize,
        noops: usize,
        /// Frames stepped with [`AtariGame::step_unseen`].
        unseen: usize,
    }

    const H: usize = 21;
    const W: usize = 16;

    impl Scripted {
        pub(crate) fn new(meanings: &[&str], life_every: u64) -> Scripted {
            let meanings = meanings.iter().map(|m| m.to_string()).collect();
            Scripted { meanings, t: 0, life_every, actions: vec![], resets: 0, noops: 2, unseen: 0 }
        }
        fn draw(&self, action: usize, rgb: &mut [u8]) {
            for (i, px) in rgb.chunks_exact_mut(3).enumerate() {
                let mut v = (self.t * 5 + action as u64 + (i % W) as u64) % 256;
                if self.t % 2 == 1 && i % 7 == 0 {
                    v = 250;
                }
                px.copy_from_slice(&[v as u8, (v / 2) as u8, 255 - v as u8]);
            }
        }
    }

    impl AtariGame for Scripted {
        fn id(&self) -> &str {
            "Scripted"
        }
        fn frame_shape(&self) -> (usize, usize) {
            (H, W)
        }
        fn action_meanings(&self) -> Vec<String> {
            self.meanings.clone()
        }
        fn reset(&mut self, _seed: Option<u64>, rgb: &mut [u8]) -> Result<()> {
            self.t = 0;
            self.resets += 1;
            self.draw(0, rgb);
            Ok(())
        }
        fn step(&mut self, action: usize, rgb: &mut [u8]) -> Result<GameStep> {
            if action >= self.meanings.len() {
                return Err(EnvError::InvalidAction(format!("action {action}")));
            }
            self.t += 1;
            self.actions.push(action);
            self.draw(action, rgb);
            let reward = if self.t % 3 == 0 { self.t as f64 } else { 0.0 };
            Ok(GameStep { reward, terminated: self.t >= 3 * self.life_every, truncated: false })
        }
        fn step_unseen(&mut self, action: usize) -> Result<GameStep> {
            self.unseen += 1;
            self.step(action, &mut [0; H * W * 3])
        }
        fn screen(&mut self, rgb: &mut [u8]) -> Result<()> {
            let action = if self.t == 0 { 0 } else { self.actions.last().copied().unwrap_or(0) };
            self.draw(action, rgb);
            Ok(())
        }
        fn lives(&self) -> Result<u32> {
            Ok(3u32.saturating_sub((self.t / self.life_every) as u32))
        }
        fn noop_count(&mut self, noop_max: usize) -> Result<usize> {
            Ok(self.noops.min(noop_max))
        }
    }

    fn opts(frame_stack: usize) -> AtariOptions {
        AtariOptions { screen_size: 8, frame_stack, ..AtariOptions::default() }
    }

    /// WarpFrame of one RGB frame, for the expected observations.
    fn warp(rgb: &[u8]) -> Vec<u8> {
        let mut g = vec![0; H * W];
        rgb_to_gray(rgb, &mut g).unwrap();
        let mut out = vec![0; 64];
        AreaResize::new(H, W, 8, 8).unwrap().apply(&g, &mut out).unwrap();
        out
    }

    /// The scripted game's frame `t` after `action`.
    fn frame_of(t: u64, action: usize) -> Vec<u8> {
        let g = Scripted { t, ..Scripted::new(&["NOOP"], 1) };
        let mut rgb = vec![0; H * W * 3];
        g.draw(action, &mut rgb);
        rgb
    }

    #[test]
    fn a_step_repeats_the_action_sums_and_clips_rewards_and_maxes_the_last_two_frames() {
        let mut env = AtariWrapper::new(Scripted::new(&["NOOP", "UP", "DOWN"], 1000), opts(1)).unwrap();
        env.reset(Some(0)).unwrap();
        assert_eq!(env.game().actions, vec![0, 0], "two no-ops after the reset");
        let s = env.step(2).unwrap();
        assert_eq!(env.game().actions[2..], [2, 2, 2, 2]);
        assert_eq!(s.reward, 1.0, "frame 3 scores 3: clipped to its sign");
        let mut unclipped = AtariWrapper::new(
            Scripted::new(&["NOOP", "UP", "DOWN"], 1000),
            AtariOptions { clip_reward: false, ..opts(1) },
        )
        .unwrap();
        unclipped.reset(None).unwrap();
        assert_eq!(unclipped.step(1).unwrap().reward, 3.0 + 6.0, "frames 3..=6 score 3 and 6");
        // Frames 5 and 6 of the game (the skip's last two), pixel-wise max, then warped.
        let (a, b) = (frame_of(5, 2), frame_of(6, 2));
        let mut m = vec![0; a.len()];
        max_frames(&a, &b, &mut m).unwrap();
        assert_eq!(env.observation(), warp(&m).as_slice());
    }

    #[test]
    fn frames_no_one_sees_are_not_read_and_a_game_ending_on_one_shows_its_frame() {
        let o = AtariOptions { terminal_on_life_loss: false, ..opts(1) };
        let mut env = AtariWrapper::new(Scripted::new(&["NOOP", "UP", "DOWN"], 4), o).unwrap();
        env.reset(None).unwrap();
        assert_eq!(env.game().unseen, 1, "the first of the two no-ops");
        env.step(1).unwrap();
        env.step(1).unwrap();
        assert_eq!(env.game().unseen, 1 + 2 + 2, "the first two frames of each 4-frame step");
        let s = env.step(2).unwrap();
        assert!(s.terminated && env.game().t == 12, "game over at frame 12, the step's second");
        assert_eq!(env.game().unseen, 7);
        assert_eq!(env.raw_frame(), frame_of(12, 2).as_slice(), "the last frame, read after the game over");
    }

    #[test]
    fn the_stack_starts_with_zeros_and_shifts_oldest_first() {
        let mut env = AtariWrapper::new(Scripted::new(&["NOOP", "UP", "DOWN"], 1000), opts(3)).unwrap();
        let first = env.reset(None).unwrap().to_vec();
        assert_eq!(env.observation_shape(), [3, 8, 8]);
        assert!(first[..128].iter().all(|&v| v == 0), "two empty slots before the first frame");
        assert_eq!(first[128..], warp(&frame_of(2, 0))[..], "the last no-op's frame, unpooled");
        env.step(1).unwrap();
        let second = env.observation().to_vec();
        assert!(second[..64].iter().all(|&v| v == 0));
        assert_eq!(second[64..128], first[128..], "the first frame moved one slot older");
        env.reset(None).unwrap();
        assert!(env.observation()[..128].iter().all(|&v| v == 0), "a reset clears the stack");
    }

    #[test]
    fn a_lost_life_ends_the_episode_but_not_the_game_and_the_score_counts_every_life() {
        // A life every 10 frames: steps of 4 frames after 2 no-ops lose the first life at frame 10.
        let mut env = AtariWrapper::new(Scripted::new(&["NOOP", "UP", "DOWN"], 10), opts(1)).unwrap();
        env.reset(Some(1)).unwrap();
        let (mut ends, mut scores) = (vec![], vec![]);
        for _ in 0..40 {
            let s = env.step(1).unwrap();
            if s.terminated {
                ends.push((env.game().t, env.game().resets));
                if let Some(&(_, v)) = s.info.values.iter().find(|(k, _)| *k == "game_score") {
                    scores.push(v);
                }
                env.reset(None).unwrap();
            }
        }
        // Lives fall at frames 10, 20 and 30 (game over). After each lost life the reset takes
        // one 4-frame no-op step; after the game over it resets the game (2 no-ops).
        // (frame of each episode's end, game resets so far): the game itself is reset only
        // after the game over, then the next game goes the same way.
        assert_eq!(ends[..4], [(10, 1), (22, 1), (30, 1), (10, 2)]);
        // Every 3rd frame t scores t: 3 + 6 + … + 30 over the whole game.
        assert_eq!(scores[0], (1..=10).map(|k| 3.0 * k as f64).sum::<f64>());
        let mut no_life_loss = AtariWrapper::new(
            Scripted::new(&["NOOP", "UP", "DOWN"], 10),
            AtariOptions { terminal_on_life_loss: false, ..opts(1) },
        )
        .unwrap();
        no_life_loss.reset(None).unwrap();
        let steps = (0..20).position(|_| no_life_loss.step(1).unwrap().terminated).unwrap() + 1;
        assert_eq!(steps, 7, "only the game over ends an episode (frames 3..=30 in steps of 4)");
    }

    #[test]
    fn games_with_fire_press_it_then_action_two_at_every_reset() {
        let mut env = AtariWrapper::new(Scripted::new(&["NOOP", "FIRE", "RIGHT", "LEFT"], 1000), opts(1)).unwrap();
        env.reset(None).unwrap();
        assert_eq!(env.game().actions, vec![0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
        let without = AtariWrapper::new(Scripted::new(&["NOOP", "RIGHT", "LEFT"], 1000), opts(1));
        let mut without = without.unwrap();
        without.reset(None).unwrap();
        assert_eq!(without.game().actions, vec![0, 0]);
    }

    #[test]
    fn bad_settings_and_games_are_clear_errors() {
        let err = |m: &[&str], o: AtariOptions| AtariWrapper::new(Scripted::new(m, 10), o).err().unwrap().to_string();
        assert!(err(&["NOOP"], AtariOptions { frame_skip: 0, ..opts(1) }).contains("frame_skip = 0"));
        assert!(err(&["NOOP"], AtariOptions { frame_stack: 100_000, ..opts(1) })
            .contains("frame_stack = 100000: at most 64"));
        assert!(err(&["NOOP"], AtariOptions { noop_max: 100_000_000, ..opts(1) }).contains("noop_max = 100000000"));
        assert!(err(&["NOOP"], AtariOptions { frame_skip: usize::MAX, ..opts(1) })
            .contains("frame_skip = 18446744073709551615: at most 1000"));
        assert!(err(&["NOOP"], AtariOptions { frame_stack: 0, ..opts(1) }).contains("frame_stack = 0"));
        assert!(err(&["NOOP"], AtariOptions { screen_size: 40, ..opts(1) }).contains("screen_size = 40: at most 16"));
        assert!(err(&["UP", "NOOP"], opts(1)).contains("action 0 to be NOOP"));
        assert!(err(&["NOOP", "UP", "FIRE"], opts(1)).contains("action 1 to be FIRE"));
        assert!(AtariWrapper::new(Scripted::new(&["UP", "DOWN"], 10), AtariOptions { noop_max: 0, ..opts(1) }).is_ok());
        let mut env = AtariWrapper::new(Scripted::new(&["NOOP", "UP"], 10), opts(1)).unwrap();
        env.reset(None).unwrap();
        assert!(env.step(5).is_err(), "the game's own error for an action out of range");
    }
}
