//! The reward model of RLHF (Ouyang et al. 2022, Sec. 3.5): a [`TinyLm`] whose value head, read
//! at the **last real token** of a response, is the score r(prompt, response); trained on
//! preference pairs with the Bradley–Terry loss −log σ(r_chosen − r_rejected)
//! ([`bradley_terry_loss`]).
//!
//! The preferences are scripted, standing in for human labellers ([`Labeller`]): a correct
//! answer beats an incorrect one; optionally (graded), between two incorrect answers the one with
//! more tokens right in place (compared with the correct answer, EOS included) wins; equal
//! quality gives no pair. The
//! candidates for each prompt are samples of the SFT policy, the correct answer and a corrupted
//! copy of it (one digit changed, a digit dropped or added).

use crate::model::TinyLm;
use crate::rlhf::bradley_terry_loss;
use crate::sampling::{generate, SEQ_LEN};
use crate::task::{Problem, MAX_ANSWER_LEN, PAD, PROMPT_LEN};
use candle_core::{Device, Tensor};
use proxima::optim::{Gradients, Optimizer, Params};
use proxima::{ProximaError, Result};
use rand::seq::SliceRandom;
use rand::Rng;
use std::cmp::Ordering;

/// A labelled comparison of two responses to one prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreferencePair {
    /// The prompt.
    pub problem: Problem,
    /// The preferred response (tokens up to and including EOS, or up to MAX_ANSWER_LEN).
    pub chosen: Vec<u32>,
    /// The other response.
    pub rejected: Vec<u32>,
}

/// Which comparisons the scripted labeller makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Labeller {
    /// Correct beats incorrect; two incorrect (or two correct) responses are not compared.
    Binary,
    /// As binary, and between two incorrect responses the one with more tokens right in place
    /// wins (partial credit).
    Graded,
}

/// The scripted labeller's quality of a response: (correct, tokens right in place).
pub fn quality(p: &Problem, response: &[u32]) -> (bool, usize) {
    let answer = p.answer();
    let in_place = response.iter().zip(&answer).filter(|(a, b)| a == b).count();
    (p.reward(response) > 0.0, in_place)
}

/// The scripted preference between responses `a` and `b` to `p`: `Greater` when `a` is
/// preferred, `Equal` when neither is.
pub fn scripted_preference(labeller: Labeller, p: &Problem, a: &[u32], b: &[u32]) -> Ordering {
    match labeller {
        Labeller::Graded => quality(p, a).cmp(&quality(p, b)),
        Labeller::Binary => quality(p, a).0.cmp(&quality(p, b).0),
    }
}

/// A corrupted copy of the correct answer (always incorrect): one digit changed, the last digit
/// dropped, or a digit added.
pub fn corrupt<R: Rng + ?Sized>(p: &Problem, rng: &mut R) -> Vec<u32> {
    let mut a = p.answer();
    let digits = a.len() - 1;
    match rng.random_range(0..3) {
        0 => {
            let i = rng.random_range(0..digits);
            a[i] = (a[i] + rng.random_range(1..10)) % 10;
        }
        1 if digits > 1 => {
            a.remove(digits - 1);
        }
        _ if a.len() < MAX_ANSWER_LEN => a.insert(digits, rng.random_range(1..10)),
        _ => {
            a[0] = (a[0] + 1) % 10;
        }
    }
    a
}

/// Preference pairs for `problems`: per prompt, the candidates are `samples` responses of
/// `policy` (temperature 1), the correct answer and a [`corrupt`]ed one; up to `pairs_per_prompt`
/// distinct pairs with a strict preference are drawn among them.
///
/// # Errors
/// Tensor errors.
pub fn make_pairs<R: Rng + ?Sized>(
    labeller: Labeller,
    policy: &TinyLm,
    problems: &[Problem],
    samples: usize,
    pairs_per_prompt: usize,
    rng: &mut R,
) -> Result<Vec<PreferencePair>> {
    let mut out = Vec::new();
    for chunk in problems.chunks(256) {
        let batch: Vec<Problem> = chunk.iter().flat_map(|p| std::iter::repeat_n(*p, samples)).collect();
        let s = generate(policy, &batch, false, rng)?;
        for (j, p) in chunk.iter().enumerate() {
            let mut cands: Vec<Vec<u32>> = (0..samples).map(|k| s.response(j * samples + k)).collect();
            cands.push(p.answer());
            cands.push(corrupt(p, rng));
            cands.sort();
            cands.dedup();
            let mut pairs: Vec<(usize, usize)> = (0..cands.len())
                .flat_map(|a| (a + 1..cands.len()).map(move |b| (a, b)))
                .filter(|&(a, b)| scripted_preference(labeller, p, &cands[a], &cands[b]) != Ordering::Equal)
                .collect();
            pairs.shuffle(rng);
            for (a, b) in pairs.into_iter().take(pairs_per_prompt) {
                let (c, r) = if scripted_preference(labeller, p, &cands[a], &cands[b]) == Ordering::Greater {
                    (a, b)
                } else {
                    (b, a)
                };
                out.push(PreferencePair { problem: *p, chosen: cands[c].clone(), rejected: cands[r].clone() });
            }
        }
    }
    Ok(out)
}

/// The preference pairs `lm rm` trains on (and `lm dpo`): the training prompts' pairs, then the
/// held-out prompts', drawn from `sft` ([`make_pairs`]) with one RNG seeded `seed`, which is
/// returned after them (`lm rm` draws its batches from it).
///
/// # Errors
/// Tensor errors.
pub fn preference_data(
    labeller: Labeller,
    sft: &TinyLm,
    samples: usize,
    pairs_per_prompt: usize,
    seed: u64,
) -> Result<(Vec<PreferencePair>, Vec<PreferencePair>, rand_chacha::ChaCha8Rng)> {
    use rand::SeedableRng;
    let (train, held) = crate::task::split();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let train_pairs = make_pairs(labeller, sft, &train, samples, pairs_per_prompt, &mut rng)?;
    let held_pairs = make_pairs(labeller, sft, &held, samples, pairs_per_prompt, &mut rng)?;
    Ok((train_pairs, held_pairs, rng))
}

/// Full sequences `[B, SEQ_LEN]` (prompt, response, PAD) and response lengths for responses.
///
/// # Errors
/// `InvalidArgument` for an empty or too long response.
pub fn sequences(items: &[(Problem, &[u32])]) -> Result<(Tensor, Vec<usize>)> {
    let mut tokens = vec![PAD; items.len() * SEQ_LEN];
    let mut lengths = Vec::with_capacity(items.len());
    for (i, (p, r)) in items.iter().enumerate() {
        if r.is_empty() || r.len() > MAX_ANSWER_LEN {
            return Err(ProximaError::InvalidArgument(format!(
                "a response of {} tokens (1..={MAX_ANSWER_LEN} expected)",
                r.len()
            )));
        }
        tokens[i * SEQ_LEN..i * SEQ_LEN + PROMPT_LEN].copy_from_slice(&p.prompt());
        tokens[i * SEQ_LEN + PROMPT_LEN..i * SEQ_LEN + PROMPT_LEN + r.len()].copy_from_slice(r);
        lengths.push(r.len());
    }
    Ok((Tensor::from_vec(tokens, (items.len(), SEQ_LEN), &Device::Cpu)?, lengths))
}

/// Scores `[B]` (differentiable): the value head of `rm` at each sequence's last real token,
/// position PROMPT_LEN + length − 1 of `tokens` `[B, SEQ_LEN]`.
///
/// # Errors
/// `InvalidArgument` for a length outside 1..=MAX_ANSWER_LEN; tensor errors.
pub fn scores(rm: &TinyLm, tokens: &Tensor, lengths: &[usize]) -> Result<Tensor> {
    if let Some(l) = lengths.iter().find(|&&l| l == 0 || l > MAX_ANSWER_LEN) {
        return Err(ProximaError::InvalidArgument(format!("response length {l} outside 1..={MAX_ANSWER_LEN}")));
    }
    let (_, values) = rm.forward(tokens)?;
    let idx: Vec<u32> = lengths.iter().map(|&l| (PROMPT_LEN + l - 1) as u32).collect();
    let idx = Tensor::from_vec(idx, (lengths.len(), 1), &Device::Cpu)?;
    Ok(values.gather(&idx, 1)?.squeeze(1)?)
}

/// The [`sequences`] of n pairs: the n chosen responses, then the n rejected ones (`[2n, SEQ_LEN]`
/// tokens and 2n lengths).
///
/// # Errors
/// `InvalidArgument` for an empty or too long response.
pub fn pair_sequences(pairs: &[PreferencePair]) -> Result<(Tensor, Vec<usize>)> {
    let items: Vec<(Problem, &[u32])> = pairs
        .iter()
        .map(|p| (p.problem, p.chosen.as_slice()))
        .chain(pairs.iter().map(|p| (p.problem, p.rejected.as_slice())))
        .collect();
    sequences(&items)
}

fn pair_scores(rm: &TinyLm, pairs: &[PreferencePair]) -> Result<(Tensor, Tensor)> {
    let (tokens, lengths) = pair_sequences(pairs)?;
    let s = scores(rm, &tokens, &lengths)?;
    let n = pairs.len();
    Ok((s.narrow(0, 0, n)?, s.narrow(0, n, n)?))
}

/// A batch of `batch` pairs drawn uniformly with replacement (the batches of `lm rm` and
/// `lm dpo`).
///
/// # Errors
/// `InvalidArgument` for no pairs.
pub fn sample_pairs<R: Rng + ?Sized>(
    pairs: &[PreferencePair],
    batch: usize,
    rng: &mut R,
) -> Result<Vec<PreferencePair>> {
    if pairs.is_empty() {
        return Err(ProximaError::InvalidArgument("no preference pairs to train on".into()));
    }
    Ok((0..batch).map(|_| pairs[rng.random_range(0..pairs.len())].clone()).collect())
}

/// One Bradley–Terry step on a random batch of `batch` pairs. Returns the loss.
///
/// # Errors
/// `InvalidArgument` for no pairs; tensor errors; `NonFinite` from the optimiser.
pub fn rm_step<R: Rng + ?Sized>(
    rm: &TinyLm,
    opt: &mut Optimizer,
    pairs: &[PreferencePair],
    batch: usize,
    rng: &mut R,
) -> Result<f64> {
    let picked = sample_pairs(pairs, batch, rng)?;
    let (c, r) = pair_scores(rm, &picked)?;
    let loss = bradley_terry_loss(&c, &r)?;
    let l = loss.to_scalar::<f32>()? as f64;
    let params = rm.named_params();
    opt.step(Params::Vars { vars: &params, grads: Gradients::Store(&loss.backward()?) }, Some(crate::MAX_GRAD_NORM))?;
    Ok(l)
}

/// Pairwise accuracy: the fraction of pairs whose chosen response scores higher.
///
/// # Errors
/// Tensor errors.
pub fn pairwise_accuracy(rm: &TinyLm, pairs: &[PreferencePair]) -> Result<f64> {
    Ok(pairwise_accuracy_by_kind(rm, pairs)?[0])
}

/// Pairwise accuracy over all pairs, over the pairs whose chosen response is correct (the
/// comparisons the task's true reward makes), and over the pairs of two incorrect responses
/// (NaN where a kind has no pairs).
///
/// # Errors
/// Tensor errors.
pub fn pairwise_accuracy_by_kind(rm: &TinyLm, pairs: &[PreferencePair]) -> Result<[f64; 3]> {
    let mut right = [0usize; 3];
    let mut count = [0usize; 3];
    for chunk in pairs.chunks(512) {
        let (c, r) = pair_scores(rm, chunk)?;
        let (c, r) = (c.to_vec1::<f32>()?, r.to_vec1::<f32>()?);
        for (i, p) in chunk.iter().enumerate() {
            let kind = if p.problem.reward(&p.chosen) > 0.0 { 1 } else { 2 };
            for k in [0, kind] {
                count[k] += 1;
                right[k] += usize::from(c[i] > r[i]);
            }
        }
    }
    Ok([0, 1, 2].map(|k| if count[k] == 0 { f64::NAN } else { right[k] as f64 / count[k] as f64 }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::EOS;
    use rand::SeedableRng;

    #[test]
    fn the_scripted_labeller_ranks_correct_first_then_by_digits_in_place() {
        let p = Problem { a: 47, b: 85 }; // 132 → "231" EOS
        let right = p.answer();
        for l in [Labeller::Binary, Labeller::Graded] {
            assert_eq!(scripted_preference(l, &p, &right, &[2, 3, 2, EOS]), Ordering::Greater);
            assert_eq!(scripted_preference(l, &p, &[2, 3, 2, EOS], &right), Ordering::Less);
            assert_eq!(scripted_preference(l, &p, &[9, 3, 1, EOS], &[2, 9, 1, EOS]), Ordering::Equal);
        }
        assert_eq!(scripted_preference(Labeller::Graded, &p, &[2, 3, 2, EOS], &[9, 9, 9, EOS]), Ordering::Greater);
        assert_eq!(scripted_preference(Labeller::Binary, &p, &[2, 3, 2, EOS], &[9, 9, 9, EOS]), Ordering::Equal);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        for _ in 0..200 {
            let c = corrupt(&p, &mut rng);
            assert!(p.reward(&c) == 0.0 && !c.is_empty() && c.len() <= MAX_ANSWER_LEN, "{c:?}");
        }
    }

    #[test]
    fn scores_are_read_at_the_last_real_token() {
        let rm = TinyLm::new(crate::model::LmSpec { vocab: 13, ..Default::default() }, 4, &Device::Cpu).unwrap();
        let p = Problem { a: 12, b: 30 };
        // The same prefix with different padding after the response: same score (PAD = EOS).
        let (t, l) = sequences(&[(p, &[2, 4, EOS][..]), (p, &[2, 4, EOS, 7][..])]).unwrap();
        let s = scores(&rm, &t, &l).unwrap().to_vec1::<f32>().unwrap();
        let (_, v) = rm.forward(&t).unwrap();
        let v = v.to_vec2::<f32>().unwrap();
        assert_eq!(s[0], v[0][PROMPT_LEN + 2]);
        assert_eq!(s[1], v[1][PROMPT_LEN + 3]);
        assert!(sequences(&[(p, &[][..])]).is_err());
        assert!(scores(&rm, &t, &[0, 1]).is_err());
    }
}
