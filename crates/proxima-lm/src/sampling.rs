//! Sampling from the tiny language model: responses to prompts (sampled or greedy), greedy
//! accuracy on the addition task, and log π of a response's tokens.
//!
//! Sequence layout: `[prompt (6 tokens) | response (≤ 4 tokens)]`, right-padded with [`PAD`] to
//! 10. Which positions count is decided from positions and lengths only (never from token ids).

use crate::grpo::token_log_probs;
use crate::model::TinyLm;
use crate::task::{Problem, EOS, MAX_ANSWER_LEN, PAD, PROMPT_LEN};
use candle_core::{Device, Tensor, D};
use proxima::Result;
use rand::Rng;

/// Full sequence length: prompt + the longest response.
pub const SEQ_LEN: usize = PROMPT_LEN + MAX_ANSWER_LEN;

/// Sampled responses for a batch of prompts.
#[derive(Clone, Debug)]
pub struct Samples {
    /// `[B, SEQ_LEN]` prompt + response tokens (after the first EOS: padding).
    pub tokens: Vec<u32>,
    /// `[B, MAX_ANSWER_LEN]` 1 for response positions up to and including the first EOS.
    pub mask: Vec<f32>,
    /// `[B, MAX_ANSWER_LEN]` log π_old of each sampled token (0 where masked out).
    pub log_probs: Vec<f32>,
}

impl Samples {
    /// The response of row `i` (up to and including the first EOS).
    pub fn response(&self, i: usize) -> Vec<u32> {
        let r = &self.tokens[i * SEQ_LEN + PROMPT_LEN..(i + 1) * SEQ_LEN];
        let n = self.mask[i * MAX_ANSWER_LEN..(i + 1) * MAX_ANSWER_LEN].iter().filter(|&&m| m > 0.0).count();
        r[..n].to_vec()
    }
}

/// Samples (temperature 1) or greedily decodes a response for each prompt: up to
/// [`MAX_ANSWER_LEN`] tokens, stopping a row at its first EOS.
///
/// # Errors
/// Tensor errors.
pub fn generate<R: Rng + ?Sized>(model: &TinyLm, prompts: &[Problem], greedy: bool, rng: &mut R) -> Result<Samples> {
    let b = prompts.len();
    let dev = Device::Cpu;
    let mut tokens = vec![PAD; b * SEQ_LEN];
    for (i, p) in prompts.iter().enumerate() {
        tokens[i * SEQ_LEN..i * SEQ_LEN + PROMPT_LEN].copy_from_slice(&p.prompt());
    }
    let mut mask = vec![0f32; b * MAX_ANSWER_LEN];
    let mut log_probs = vec![0f32; b * MAX_ANSWER_LEN];
    let mut done = vec![false; b];
    for step in 0..MAX_ANSWER_LEN {
        let t = PROMPT_LEN + step;
        let input: Vec<u32> = (0..b).flat_map(|i| tokens[i * SEQ_LEN..i * SEQ_LEN + t].to_vec()).collect();
        let (logits, _) = model.forward(&Tensor::from_vec(input, (b, t), &dev)?)?;
        let last =
            candle_nn::ops::log_softmax(&logits.narrow(1, t - 1, 1)?.squeeze(1)?, D::Minus1)?.to_vec2::<f32>()?;
        for i in 0..b {
            if done[i] {
                continue;
            }
            let lp = &last[i];
            let tok = if greedy {
                (0..lp.len()).max_by(|&x, &y| lp[x].total_cmp(&lp[y])).expect("non-empty vocabulary")
            } else {
                let u: f32 = rng.random();
                let mut acc = 0f32;
                let mut pick = lp.len() - 1;
                for (k, l) in lp.iter().enumerate() {
                    acc += l.exp();
                    if u < acc {
                        pick = k;
                        break;
                    }
                }
                pick
            };
            tokens[i * SEQ_LEN + t] = tok as u32;
            mask[i * MAX_ANSWER_LEN + step] = 1.0;
            log_probs[i * MAX_ANSWER_LEN + step] = lp[tok];
            if tok as u32 == EOS {
                done[i] = true;
            }
        }
        if done.iter().all(|&d| d) {
            break;
        }
    }
    Ok(Samples { tokens, mask, log_probs })
}

/// Greedy exact-match accuracy over `problems` (batched).
///
/// # Errors
/// Tensor errors.
pub fn accuracy(model: &TinyLm, problems: &[Problem]) -> Result<f64> {
    let mut correct = 0.0;
    let mut rng = rand::rng();
    for chunk in problems.chunks(500) {
        let s = generate(model, chunk, true, &mut rng)?;
        correct += chunk.iter().enumerate().map(|(i, p)| p.reward(&s.response(i))).sum::<f64>();
    }
    Ok(correct / problems.len().max(1) as f64)
}

/// log π(response token) at every response position `[B, MAX_ANSWER_LEN]` for full sequences
/// `tokens` `[B, SEQ_LEN]`: position PROMPT_LEN − 1 + k predicts response token k.
///
/// # Errors
/// Tensor errors.
pub fn response_log_probs(model: &TinyLm, tokens: &Tensor) -> Result<Tensor> {
    let input = tokens.narrow(1, 0, SEQ_LEN - 1)?;
    let (logits, _) = model.forward(&input)?;
    let resp_logits = logits.narrow(1, PROMPT_LEN - 1, MAX_ANSWER_LEN)?;
    let targets = tokens.narrow(1, PROMPT_LEN, MAX_ANSWER_LEN)?.contiguous()?;
    token_log_probs(&resp_logits.contiguous()?, &targets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tiny_for_tests as tiny;
    use crate::task::split;
    use rand::SeedableRng;

    /// Response masks come from positions: 1 up to and including the first EOS, 0 after, and
    /// the stored log-probs are those of the sampled tokens under the model.
    #[test]
    fn sampled_responses_masks_and_log_probs_agree() {
        let m = tiny();
        let (train, _) = split();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let s = generate(&m, &train[..16], false, &mut rng).unwrap();
        let tokens = Tensor::from_vec(s.tokens.clone(), (16, SEQ_LEN), &Device::Cpu).unwrap();
        let lp = response_log_probs(&m, &tokens).unwrap().to_vec2::<f32>().unwrap();
        for i in 0..16 {
            let mask = &s.mask[i * MAX_ANSWER_LEN..(i + 1) * MAX_ANSWER_LEN];
            let n = s.response(i).len();
            assert!(mask[..n].iter().all(|&x| x == 1.0) && mask[n..].iter().all(|&x| x == 0.0));
            let resp = s.response(i);
            assert!(resp[..n.saturating_sub(1)].iter().all(|&t| t != EOS), "EOS only at the end");
            assert!(n == MAX_ANSWER_LEN || resp.last() == Some(&EOS));
            for k in 0..n {
                assert!((lp[i][k] - s.log_probs[i * MAX_ANSWER_LEN + k]).abs() < 1e-4, "row {i} pos {k}");
            }
        }
    }
}
