//! "Did you mean …?" for a misspelt name: the closest of the valid names by edit distance.

/// Levenshtein edit distance between two strings (by chars).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let sub = prev[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The candidate closest to `s` (case-insensitive edit distance), if it is within a third of
/// its length (at least 2 edits): used for "did you mean …?" hints.
pub fn closest<'a>(s: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let low = s.to_lowercase();
    candidates
        .iter()
        .map(|c| (edit_distance(&low, &c.to_lowercase()), *c))
        .min()
        .filter(|(d, c)| *d <= (c.len() / 3).max(2))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn closest_finds_typos() {
        assert_eq!(closest("cartpole-v1", &["CartPole-v1", "Acrobot-v1"]), Some("CartPole-v1"));
        assert_eq!(closest("n_step", &["n_steps", "n_envs"]), Some("n_steps"));
        assert_eq!(closest("zzzzzzzzzz", &["n_steps", "n_envs"]), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
