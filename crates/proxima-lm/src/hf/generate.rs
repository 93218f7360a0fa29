//! Batched generation from a [`CausalLm`] with its key/value cache: the prompts left-padded (TRL's
//! and `transformers`' layout) and read once, then one token per row per step, sampled with
//! temperature, top-k and top-p (in that order, as `generate`'s logits processors apply them) or
//! greedily, until every row has produced a stop token or `max_new_tokens`. Seeded: the same
//! seed and inputs give the same tokens.

use super::model::{CausalLm, KvCache};
use proxima::{ProximaError, Result};
use rand::Rng;

/// How to sample (the names of `transformers`' `GenerationConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingConfig {
    /// Tokens to generate at most per row (TRL's `max_completion_length`).
    pub max_new_tokens: usize,
    /// Sample (`true`) or take the most likely token (`false`, greedy).
    pub do_sample: bool,
    /// Logits are divided by it before sampling (> 0).
    pub temperature: f64,
    /// Keep only the k most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p` (1: all).
    pub top_p: f64,
    /// Tokens that end a row's completion (kept as its last token).
    pub stop_token_ids: Vec<u32>,
    /// The token left padding is made of.
    pub pad_token_id: u32,
}

impl Default for SamplingConfig {
    /// TRL's GRPO sampling: temperature 1, no top-k or top-p, 256 new tokens.
    fn default() -> Self {
        SamplingConfig {
            max_new_tokens: 256,
            do_sample: true,
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            stop_token_ids: Vec::new(),
            pad_token_id: 0,
        }
    }
}

impl SamplingConfig {
    /// # Errors
    /// `InvalidArgument` for a temperature ≤ 0 or not finite, or top-p outside (0, 1].
    pub fn check(&self) -> Result<()> {
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(ProximaError::InvalidArgument(format!("temperature must be > 0, got {}", self.temperature)));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(ProximaError::InvalidArgument(format!("top_p must be in (0, 1], got {}", self.top_p)));
        }
        if self.max_new_tokens == 0 {
            return Err(ProximaError::InvalidArgument("max_new_tokens must be at least 1".into()));
        }
        Ok(())
    }
}

/// What [`generate`] returns, per row.
#[derive(Clone, Debug, PartialEq)]
pub struct Completions {
    /// The generated tokens (the stop token last, when one came), no padding.
    pub tokens: Vec<Vec<u32>>,
    /// Whether the row ended without a stop token (cut at `max_new_tokens`).
    pub truncated: Vec<bool>,
}

/// Generates a completion for each prompt (token ids, no padding; at least one token each).
///
/// # Errors
/// `InvalidArgument` for an empty prompt, a prompt plus `max_new_tokens` longer than the model's
/// positions, or a bad [`SamplingConfig`]; [`CausalLm::forward`]'s.
pub fn generate<R: Rng + ?Sized>(
    lm: &CausalLm,
    prompts: &[Vec<u32>],
    cfg: &SamplingConfig,
    rng: &mut R,
) -> Result<Completions> {
    cfg.check()?;
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    if prompts.is_empty() || prompts.iter().any(Vec::is_empty) {
        return Err(ProximaError::InvalidArgument("every prompt needs at least one token".into()));
    }
    if longest + cfg.max_new_tokens > lm.config().max_positions {
        return Err(ProximaError::InvalidArgument(format!(
            "a prompt of {longest} tokens and {} new ones exceed the model's {} positions",
            cfg.max_new_tokens,
            lm.config().max_positions
        )));
    }
    let (mut ids, mut key_mask, mut pos) = (Vec::new(), Vec::new(), Vec::new());
    for p in prompts {
        let pad = longest - p.len();
        ids.push([vec![cfg.pad_token_id; pad], p.clone()].concat());
        key_mask.push([vec![0u8; pad], vec![1u8; p.len()]].concat());
        pos.push([vec![0u32; pad], (0..p.len() as u32).collect()].concat());
    }
    let mut next_pos: Vec<u32> = prompts.iter().map(|p| p.len() as u32).collect();
    // Every position this call reads, allocated once.
    let mut cache = KvCache::with_capacity(longest + cfg.max_new_tokens);
    let mut logits = lm.forward(&ids, &pos, &key_mask, Some(&mut cache))?;
    let mut out = Completions { tokens: vec![Vec::new(); prompts.len()], truncated: vec![true; prompts.len()] };
    for _ in 0..cfg.max_new_tokens {
        let t = logits.dim(1)?;
        let last = logits.narrow(1, t - 1, 1)?.squeeze(1)?.to_vec2::<f32>()?;
        let mut step = Vec::with_capacity(prompts.len());
        for (r, row) in last.iter().enumerate() {
            let done = !out.truncated[r];
            let tok = if done { cfg.pad_token_id } else { next_token(row, cfg, rng) };
            if !done {
                out.tokens[r].push(tok);
                out.truncated[r] = !cfg.stop_token_ids.contains(&tok);
            }
            step.push(vec![tok]);
        }
        if out.truncated.iter().all(|&t| !t) {
            break;
        }
        key_mask.iter_mut().for_each(|m| m.push(1));
        let step_pos: Vec<Vec<u32>> = next_pos.iter().map(|&p| vec![p]).collect();
        next_pos.iter_mut().for_each(|p| *p += 1);
        if out.tokens[0].len() == cfg.max_new_tokens {
            break; // the last token needs no forward pass
        }
        logits = lm.forward(&step, &step_pos, &key_mask, Some(&mut cache))?;
    }
    Ok(out)
}

/// The next token from one row's logits: the argmax when not sampling, else a draw from
/// softmax(logits / temperature) restricted to the top-k, then to the top-p nucleus.
pub fn next_token<R: Rng + ?Sized>(logits: &[f32], cfg: &SamplingConfig, rng: &mut R) -> u32 {
    if !cfg.do_sample {
        return argmax(logits);
    }
    let mut order: Vec<usize> = (0..logits.len()).collect();
    // Most likely first; ties by token id, so the order (and the draw) is reproducible.
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    if cfg.top_k > 0 {
        order.truncate(cfg.top_k);
    }
    let top = f64::from(logits[order[0]]);
    let mut probs: Vec<f64> = order.iter().map(|&i| ((f64::from(logits[i]) - top) / cfg.temperature).exp()).collect();
    let total: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= total);
    if cfg.top_p < 1.0 {
        // Keep tokens while the mass before them is below top_p (the first always).
        let mut mass = 0.0;
        let keep = probs
            .iter()
            .take_while(|&&p| {
                let before = mass;
                mass += p;
                before < cfg.top_p
            })
            .count();
        probs.truncate(keep.max(1));
    }
    let total: f64 = probs.iter().sum();
    let mut u = rng.random::<f64>() * total;
    for (k, p) in probs.iter().enumerate() {
        u -= p;
        if u < 0.0 {
            return order[k] as u32;
        }
    }
    order[probs.len() - 1] as u32
}

/// The index of the largest value (the first of equals, as `torch.argmax`).
fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn frequencies(logits: &[f32], cfg: &SamplingConfig, n: usize) -> Vec<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut count = vec![0usize; logits.len()];
        for _ in 0..n {
            count[next_token(logits, cfg, &mut rng) as usize] += 1;
        }
        count.iter().map(|&c| c as f64 / n as f64).collect()
    }

    #[test]
    fn draws_follow_the_tempered_truncated_distribution() {
        let logits = [2.0f32, 1.0, 0.5, 0.0, -1.0];
        let cfg = SamplingConfig { temperature: 0.7, ..SamplingConfig::default() };
        let p: Vec<f64> = logits.iter().map(|&l| (f64::from(l) / 0.7).exp()).collect();
        let z: f64 = p.iter().sum();
        for (f, p) in frequencies(&logits, &cfg, 40_000).iter().zip(&p) {
            assert!((f - p / z).abs() < 0.01, "{f} vs {}", p / z);
        }
        // top-k 2: only the two most likely, renormalised.
        let f = frequencies(&logits, &SamplingConfig { top_k: 2, ..SamplingConfig::default() }, 40_000);
        let e = (1.0f64).exp();
        assert!((f[0] - e / (e + 1.0)).abs() < 0.01 && f[2..].iter().all(|&x| x == 0.0), "{f:?}");
        // top-p 0.5: the first token alone holds more than half the mass.
        let f = frequencies(&logits, &SamplingConfig { top_p: 0.5, ..SamplingConfig::default() }, 1_000);
        assert_eq!(f[0], 1.0, "{f:?}");
        let greedy = SamplingConfig { do_sample: false, ..SamplingConfig::default() };
        assert_eq!(frequencies(&logits, &greedy, 10)[0], 1.0);
    }

    #[test]
    fn bad_settings_are_errors() {
        assert!(SamplingConfig { temperature: 0.0, ..SamplingConfig::default() }.check().is_err());
        assert!(SamplingConfig { top_p: 1.5, ..SamplingConfig::default() }.check().is_err());
    }
}
