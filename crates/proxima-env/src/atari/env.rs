//! An [`AtariWrapper`] as an [`Env`]: observations `Box(0, 255, [frame_stack, screen_size,
//! screen_size], uint8)` (crossing the `Env` API as f32, every value exact), actions
//! `Discrete(n)` (the game's minimal action set), and the ids that name one:
//!
//! `atari:GAME[?key=value&…]`, where `GAME` is a bare game name (`Breakout`, made as
//! `ALE/Breakout-v5`) or any ALE id Gymnasium knows (`ALE/Pong-v5`, `PongNoFrameskip-v4`), and
//! the keys are [`AtariOptions`]' fields with SB3's names (`noop_max`, `frame_skip`,
//! `screen_size`, `terminal_on_life_loss`, `clip_reward`, `frame_stack`,
//! `repeat_action_probability`). The options live in the id because the id is what a run's
//! checkpoint, `proxima eval` and `--resume` carry: the same id rebuilds the same env.
//!
//! Without options the id is SB3's `make_atari_env` + `VecFrameStack(4)` on a `NoFrameskip-v4`
//! game: no sticky actions, up to 30 no-ops, 4 frames skipped and max-pooled, a lost life
//! terminal, rewards clipped to their sign, 84 × 84 grayscale, 4 frames stacked.

use super::wrappers::{AtariGame, AtariOptions, AtariWrapper};
use crate::error::{EnvError, Result};
use crate::render::Frame;
use crate::{Action, Env, Info, Space, StepResult};

/// The prefix of Atari ids.
pub const ATARI_PREFIX: &str = "atari:";

/// What an `atari:` id names: the Gymnasium id of the game and the wrappers' settings.
#[derive(Clone, Debug, PartialEq)]
pub struct AtariSpec {
    /// The id handed to `gymnasium.make` (`ALE/Breakout-v5`).
    pub game_id: String,
    /// The wrapper stack's settings.
    pub options: AtariOptions,
}

const KEYS: [&str; 7] = [
    "noop_max",
    "frame_skip",
    "screen_size",
    "terminal_on_life_loss",
    "clip_reward",
    "frame_stack",
    "repeat_action_probability",
];

/// Whether `game_id` (a Gymnasium id) names an ALE game: `ALE/…` or `…NoFrameskip…`.
pub fn is_ale_game_id(game_id: &str) -> bool {
    game_id.starts_with("ALE/") || game_id.contains("NoFrameskip")
}

/// `(height, width)` of every ALE game's frames.
pub const ALE_FRAME_SHAPE: (usize, usize) = (210, 160);

/// Parses the text after `atari:` (module docs).
///
/// # Errors
/// `InvalidArgument` for an empty game, a `?` with no options after it, an unknown key (with
/// the closest known one), a value that does not parse as the key's type, a repeated key, or
/// settings out of their limits ([`AtariOptions::check`], [`AtariOptions::check_frame`] for
/// ALE's 210 × 160 frames).
pub fn parse_atari_spec(spec: &str) -> Result<AtariSpec> {
    let bad = |m: String| Err(EnvError::InvalidArgument(format!("{ATARI_PREFIX}{spec}: {m}")));
    let (game, query) = spec.split_once('?').unwrap_or((spec, ""));
    if game.is_empty() {
        return bad("no game named (e.g. `atari:Breakout` or `atari:ALE/Pong-v5`)".into());
    }
    if spec.contains('?') && query.split('&').all(str::is_empty) {
        let how = "give options as key=value joined by `&` (e.g. `atari:Breakout?frame_skip=4`), or drop the `?`";
        return bad(format!("nothing after `?`: {how}"));
    }
    let game_id = if game.contains('/') || game.contains("-v") { game.to_string() } else { format!("ALE/{game}-v5") };
    let mut o = AtariOptions::default();
    let mut seen: Vec<&str> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return bad(format!("`{pair}` is not key=value"));
        };
        if seen.contains(&k) {
            return bad(format!("`{k}` is given twice"));
        }
        seen.push(k);
        let int = |v: &str| v.parse::<usize>().map_err(|_| format!("{k} = `{v}`: expected a whole number ≥ 0"));
        let flag = |v: &str| match v {
            "true" | "1" => Ok(true),
            "false" | "0" => Ok(false),
            _ => Err(format!("{k} = `{v}`: expected true or false")),
        };
        let set = match k {
            "noop_max" => int(v).map(|x| o.noop_max = x),
            "frame_skip" => int(v).map(|x| o.frame_skip = x),
            "screen_size" => int(v).map(|x| o.screen_size = x),
            "frame_stack" => int(v).map(|x| o.frame_stack = x),
            "terminal_on_life_loss" => flag(v).map(|x| o.terminal_on_life_loss = x),
            "clip_reward" => flag(v).map(|x| o.clip_reward = x),
            "repeat_action_probability" => match v.parse::<f64>() {
                Ok(p) if (0.0..=1.0).contains(&p) => Ok(o.repeat_action_probability = p),
                _ => Err(format!("{k} = `{v}`: expected a probability between 0 and 1")),
            },
            other => {
                let hint = crate::did_you_mean::closest(other, &KEYS)
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                Err(format!("unknown option `{other}`{hint}; options: {}", KEYS.join(", ")))
            }
        };
        if let Err(m) = set {
            return bad(m);
        }
    }
    // Checked here too, so that a bad setting is refused before Python starts and names this id.
    if let Err(m) = o.check().and_then(|()| o.check_frame(ALE_FRAME_SHAPE)) {
        return bad(m);
    }
    Ok(AtariSpec { game_id, options: o })
}

/// An [`AtariWrapper`] as an [`Env`] (module docs). Each step's info has `lives` and
/// `game_over`, and at a game over `game_score` and `game_frames`: the vector env records an
/// Atari episode per game, with its real score ([`crate::vec_env::SyncVectorEnv`]).
pub struct AtariEnv<G: AtariGame> {
    id: String,
    wrapper: AtariWrapper<G>,
    n_actions: usize,
}

impl<G: AtariGame> AtariEnv<G> {
    /// Wraps `game` with `options`; `id` names the env (the `atari:` id it was made from).
    ///
    /// # Errors
    /// As [`AtariWrapper::new`].
    pub fn new(id: &str, game: G, options: AtariOptions) -> Result<AtariEnv<G>> {
        let n_actions = game.action_meanings().len();
        Ok(AtariEnv { id: id.to_string(), wrapper: AtariWrapper::new(game, options)?, n_actions })
    }

    /// The wrapper stack.
    pub fn wrapper(&self) -> &AtariWrapper<G> {
        &self.wrapper
    }
}

fn as_f32(obs: &[u8]) -> Vec<f32> {
    obs.iter().map(|&b| f32::from(b)).collect()
}

impl<G: AtariGame> Env for AtariEnv<G> {
    fn id(&self) -> &str {
        &self.id
    }
    fn observation_space(&self) -> Space {
        Space::image(&self.wrapper.observation_shape())
    }
    fn action_space(&self) -> Space {
        Space::Discrete { n: self.n_actions }
    }
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, Info)> {
        let obs = as_f32(self.wrapper.reset(seed)?);
        Ok((obs, Info::default()))
    }
    fn step(&mut self, action: Action<'_>) -> Result<StepResult> {
        let a = match action {
            Action::Discrete(a) if a < self.n_actions => a,
            other => {
                return Err(EnvError::InvalidAction(format!(
                    "{}: action {other:?} is not in Discrete({})",
                    self.id, self.n_actions
                )))
            }
        };
        let s = self.wrapper.step(a)?;
        let observation = as_f32(self.wrapper.observation());
        Ok(StepResult { observation, reward: s.reward, terminated: s.terminated, truncated: s.truncated, info: s.info })
    }
    fn render(&mut self) -> Result<Frame> {
        let (height, width) = self.wrapper.game().frame_shape();
        Ok(Frame { width, height, rgb: self.wrapper.raw_frame().to_vec() })
    }
}

/// How an Atari env's step ends an episode, read from its info (`game_over`, `game_score`,
/// `game_frames`: [`AtariEnv`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GameEpisode {
    /// A lost life ended the agent's episode, not the game: no episode is recorded.
    LifeLost,
    /// The game ended: the episode recorded is the game, its unclipped score over every life and
    /// its raw frames (what SB3's `Monitor` under `AtariWrapper` records).
    Over {
        /// The unclipped score over all lives.
        score: f64,
        /// Raw frames, no-ops and skipped frames included.
        frames: usize,
    },
}

impl GameEpisode {
    /// How the step whose info is `info` ended its episode; `None` for an env whose info has no
    /// `game_over` (every env but an Atari one).
    pub fn of(info: &Info) -> Option<GameEpisode> {
        let get = |key: &str| info.values.iter().find(|(k, _)| *k == key).map(|&(_, v)| v);
        let over = get("game_over")?;
        Some(if over == 0.0 {
            GameEpisode::LifeLost
        } else {
            let (score, frames) = (get("game_score").unwrap_or(0.0), get("game_frames").unwrap_or(0.0) as usize);
            GameEpisode::Over { score, frames }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::atari::wrappers::tests::Scripted;
    use crate::vec_env::SyncVectorEnv;

    /// Two scripted games (3 lives of 10 raw frames, a reward of t on every 3rd frame) in a
    /// vector env: every lost life is `terminated`, but one episode is recorded per game, with
    /// the game's unclipped score (3 + 6 + … + 30 = 165) and its 30 raw frames.
    #[test]
    fn the_vector_env_records_games_not_lives() {
        let opts = AtariOptions { screen_size: 8, ..AtariOptions::default() };
        let make = || -> Result<Box<dyn Env>> {
            Ok(Box::new(AtariEnv::new("atari:Scripted", Scripted::new(&["NOOP", "RIGHT"], 10), opts.clone())?))
        };
        let mut v = SyncVectorEnv::new(2, make).unwrap();
        assert_eq!(v.observation_space(), &Space::image(&[4, 8, 8]));
        assert_eq!(v.observation_space().describe(), "Box(0, 255, [4, 8, 8], uint8)");
        v.reset(1).unwrap();
        let (mut ends, mut clipped) = (0, 0.0);
        for t in 0..40 {
            v.step(&[(t % 2) as f32, 1.0]).unwrap();
            ends += v.terminated.iter().filter(|&&d| d).count();
            clipped += v.rewards[0] as f64;
            assert!(v.obs().iter().all(|x| x.fract() == 0.0 && (0.0..=255.0).contains(x)));
        }
        let games = v.finished.len();
        assert!(games >= 4 && ends >= 3 * games, "{games} games, {ends} terminations");
        for g in &v.finished {
            assert_eq!((g.episode_return, g.length), (165.0, 30), "{g:?}");
        }
        assert!(clipped < 165.0, "the agent's rewards are clipped: {clipped}");
    }

    #[test]
    fn ids_name_the_game_and_the_options() {
        let s = parse_atari_spec("Breakout").unwrap();
        assert_eq!(s.game_id, "ALE/Breakout-v5");
        assert_eq!(s.options, AtariOptions::default());
        let s = parse_atari_spec(
            "PongNoFrameskip-v4?terminal_on_life_loss=false&frame_stack=1&repeat_action_probability=0.25",
        )
        .unwrap();
        assert_eq!(s.game_id, "PongNoFrameskip-v4");
        assert!(!s.options.terminal_on_life_loss);
        assert_eq!((s.options.frame_stack, s.options.repeat_action_probability), (1, 0.25));
    }

    #[test]
    fn bad_ids_are_clear_errors() {
        for (spec, want) in [
            ("", "no game named"),
            ("?frame_skip=4", "no game named"),
            ("Breakout?frame_skips=4", "did you mean `frame_skip`"),
            ("Breakout?frame_skip=-1", "expected a whole number"),
            ("Breakout?clip_reward=yes", "expected true or false"),
            ("Breakout?repeat_action_probability=2", "between 0 and 1"),
            ("Breakout?noop_max", "is not key=value"),
            ("Breakout?noop_max=1&noop_max=2", "given twice"),
            ("Breakout?frame_skip=0", "atari:Breakout?frame_skip=0: frame_skip = 0: must be at least 1"),
            ("Breakout?", "atari:Breakout?: nothing after `?`"),
            ("Breakout?&", "atari:Breakout?&: nothing after `?`"),
            ("Breakout?frame_stack=1000", "frame_stack = 1000: at most 64"),
            ("Breakout?noop_max=100000000", "noop_max = 100000000: at most 100000"),
            ("Breakout?screen_size=200", "screen_size = 200: at most 160"),
            ("Breakout?screen_size=10", "screen_size = 10: resize 210×160 → 10×10: a shrink by a whole factor"),
        ] {
            let e = parse_atari_spec(spec).unwrap_err().to_string();
            assert!(e.contains(want), "{spec}: {e}");
        }
    }
}
