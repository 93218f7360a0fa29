//! What the benches share.

use proxima::policy::{Network, Policy};
use proxima::rollout::Minibatch;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// A minibatch of `b` rows of the observations `obs`: actions the policy samples, old
/// log-probabilities within ±0.1 of its own, advantages in ±1, returns V(s) ± 1.
pub fn minibatch_of(policy: &Network, obs: Vec<f32>, b: usize, rng: &mut ChaCha8Rng) -> Minibatch {
    let out = policy.act(&obs, false, rng).unwrap();
    Minibatch {
        len: b,
        observations: obs,
        actions: out.actions,
        old_log_probs: out.log_probs.iter().map(|l| l + rng.random_range(-0.1..0.1)).collect(),
        advantages: (0..b).map(|_| rng.random_range(-1.0..1.0)).collect(),
        old_values: out.values.clone(),
        returns: out.values.iter().map(|v| v + rng.random_range(-1.0..1.0)).collect(),
        old_head: Vec::new(),
        action_masks: Vec::new(),
        sequences: None,
        pixels: Vec::new(),
    }
}
