//! Evaluation counts an Atari env's episodes as games: a lost life (`terminated`, `game_over` 0)
//! continues the game, and the return is the game's real score (`game_score` at `game_over` 1),
//! as training's episode statistics and SB3's `evaluate_policy` under `Monitor` count them.
//! A stand-in env with an Atari env's info (3 lives of 5 steps, a clipped reward of 1 per step,
//! a real score of 100 per game) is registered under its own prefix.

use proxima::env::{Action, Env, Info, Result, Space, StepResult};
use proxima::policy::{ActionKind, Backend, Network, PolicySpec};
use rand::SeedableRng;

struct Lives {
    t: usize,
}

impl Env for Lives {
    fn id(&self) -> &str {
        "lives:Game"
    }
    fn observation_space(&self) -> Space {
        Space::uniform_box(-1.0, 1.0, &[2])
    }
    fn action_space(&self) -> Space {
        Space::Discrete { n: 2 }
    }
    fn reset(&mut self, _seed: Option<u64>) -> Result<(Vec<f32>, Info)> {
        if self.t >= 15 {
            self.t = 0; // the game is over: a new one (a lost life's reset goes on with the game)
        }
        Ok((vec![0.0, 0.0], Info::default()))
    }
    fn step(&mut self, _action: Action<'_>) -> Result<StepResult> {
        self.t += 1;
        let life_lost = self.t % 5 == 0;
        let over = self.t == 15;
        let mut values = vec![("lives", (3 - self.t / 5) as f64), ("game_over", f64::from(u8::from(over)))];
        if over {
            values.extend([("game_score", 100.0), ("game_frames", 60.0)]);
        }
        Ok(StepResult {
            observation: vec![0.0, 0.0],
            reward: 1.0,
            terminated: life_lost,
            truncated: false,
            info: Info { values },
        })
    }
}

#[test]
fn evaluation_returns_whole_games_with_their_real_score() {
    proxima::env::register_prefix("lives:", |_, _| Ok(Box::new(Lives { t: 0 })));
    let spec = PolicySpec::mlp(2, ActionKind::Discrete { n: 2 }, vec![8]);
    let net = Network::new(spec, Backend::Candle, &mut rand_chacha::ChaCha8Rng::seed_from_u64(1)).unwrap();
    let returns = proxima::train::evaluate(&net, "lives:Game", (2, false, 1), None, false).unwrap();
    assert_eq!(returns, [100.0, 100.0], "one return per game, its real score (not 5 per life)");
}
