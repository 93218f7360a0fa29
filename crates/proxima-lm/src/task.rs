//! The verifiable task of issue 6: two-digit addition, character level.
//!
//! A prompt is `ab+cd=` (both operands written with two digits, leading zeros kept); the answer
//! is the digits of the sum **reversed** (least significant first, the order in which carries are
//! computed, which makes the task learnable left to right by a small model), then EOS. Example:
//! `47+85=` → `231` EOS (132 reversed). The 10,000 prompts are split once, by a fixed hash, into
//! a held-out set of [`HELD_OUT`] prompts and a training set; the two never overlap.

use proxima::{ProximaError, Result};

/// Token ids: digits 0–9 are themselves.
pub const PLUS: u32 = 10;
/// `=`.
pub const EQUALS: u32 = 11;
/// End of sequence. Padding uses the same id on purpose: masks come from lengths, so a pad
/// equal to EOS cannot hide the real EOS.
pub const EOS: u32 = 12;
/// Padding (= EOS).
pub const PAD: u32 = EOS;
/// Vocabulary size.
pub const VOCAB: usize = 13;
/// Prompt length (`ab+cd=`).
pub const PROMPT_LEN: usize = 6;
/// Longest answer: 3 digits + EOS.
pub const MAX_ANSWER_LEN: usize = 4;
/// Held-out prompts.
pub const HELD_OUT: usize = 1000;

/// One addition problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Problem {
    /// First operand, 0–99.
    pub a: u32,
    /// Second operand, 0–99.
    pub b: u32,
}

impl Problem {
    /// The prompt tokens `a₁ a₀ + b₁ b₀ =`.
    pub fn prompt(&self) -> [u32; PROMPT_LEN] {
        [self.a / 10, self.a % 10, PLUS, self.b / 10, self.b % 10, EQUALS]
    }

    /// The correct answer: the sum's digits reversed, then EOS.
    pub fn answer(&self) -> Vec<u32> {
        let mut s = self.a + self.b;
        let mut out = Vec::new();
        loop {
            out.push(s % 10);
            s /= 10;
            if s == 0 {
                break;
            }
        }
        out.push(EOS);
        out
    }

    /// Verifiable reward: 1 when `response` (generated tokens, up to and including the first
    /// EOS; anything after it ignored) is exactly the answer, else 0.
    pub fn reward(&self, response: &[u32]) -> f64 {
        let end = response.iter().position(|&t| t == EOS).map_or(response.len(), |i| i + 1);
        f64::from(u8::from(response[..end] == self.answer()[..]))
    }
}

/// Text form of tokens, for logs: digits, `+`, `=`, `$` for EOS.
pub fn detokenize(tokens: &[u32]) -> String {
    tokens
        .iter()
        .map(|&t| match t {
            0..=9 => char::from(b'0' + t as u8),
            PLUS => '+',
            EQUALS => '=',
            EOS => '$',
            _ => '?',
        })
        .collect()
}

/// Parses `ab+cd=` (what a user types) into a problem.
///
/// # Errors
/// `InvalidArgument` for anything else.
pub fn parse_prompt(text: &str) -> Result<Problem> {
    let bad =
        || ProximaError::InvalidArgument(format!("`{text}` is not a prompt of the form ab+cd= (two digits each)"));
    let t = text.trim().strip_suffix('=').ok_or_else(bad)?;
    let (a, b) = t.split_once('+').ok_or_else(bad)?;
    if a.len() != 2 || b.len() != 2 || !a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    Ok(Problem { a: a.parse().map_err(|_| bad())?, b: b.parse().map_err(|_| bad())? })
}

/// The fixed split: `(train, held_out)`, disjoint, covering all 10,000 problems; a problem is
/// held out when a SplitMix64 hash of `100·a + b` falls in the lowest [`HELD_OUT`] of them.
pub fn split() -> (Vec<Problem>, Vec<Problem>) {
    let mix = |x: u64| {
        let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut all: Vec<(u64, Problem)> = (0..100)
        .flat_map(|a| (0..100).map(move |b| Problem { a, b }))
        .map(|p| (mix((100 * p.a + p.b) as u64), p))
        .collect();
    all.sort_by_key(|(h, _)| *h);
    let held: Vec<Problem> = all[..HELD_OUT].iter().map(|(_, p)| *p).collect();
    let train: Vec<Problem> = all[HELD_OUT..].iter().map(|(_, p)| *p).collect();
    (train, held)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn prompts_answers_and_rewards() {
        let p = Problem { a: 47, b: 85 };
        assert_eq!(detokenize(&p.prompt()), "47+85=");
        assert_eq!(detokenize(&p.answer()), "231$");
        assert_eq!(p.reward(&[2, 3, 1, EOS]), 1.0);
        assert_eq!(p.reward(&[2, 3, 1, EOS, 7, 7]), 1.0, "tokens after EOS are ignored");
        assert_eq!(p.reward(&[2, 3, 1]), 0.0, "no EOS");
        assert_eq!(p.reward(&[2, 3, EOS]), 0.0);
        assert_eq!(Problem { a: 0, b: 0 }.answer(), vec![0, EOS]);
        assert_eq!(parse_prompt("07+93=").unwrap(), Problem { a: 7, b: 93 });
        assert!(parse_prompt("7+93=").is_err() && parse_prompt("07+93").is_err() && parse_prompt("ab+cd=").is_err());
        assert!(parse_prompt("12++5=").is_err() && parse_prompt("+1+22=").is_err(), "a sign is not a digit");
    }

    #[test]
    fn the_split_is_disjoint_complete_and_fixed() {
        let (train, held) = split();
        assert_eq!((train.len(), held.len()), (9000, HELD_OUT));
        let t: HashSet<_> = train.iter().collect();
        assert!(held.iter().all(|p| !t.contains(p)));
        assert_eq!(t.len() + held.iter().collect::<HashSet<_>>().len(), 10_000);
        assert_eq!(split().1, held, "the same split every time");
    }
}
