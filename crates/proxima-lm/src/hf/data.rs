//! The trainers' view of a dataset: its rows (JSON objects, as TRL's datasets hold them), drawn
//! in a fresh order each epoch (`shuffle_dataset`), as the `transformers` `Trainer`'s sampler does.

use rand::seq::SliceRandom;
use rand::Rng;

/// Row indices, epoch after epoch.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EpochSampler {
    order: Vec<usize>,
    cursor: usize,
    /// Completed passes over the dataset.
    pub epoch: u64,
}

impl EpochSampler {
    /// The next `n` indices of a dataset of `len` rows (a new permutation, drawn from `rng` when
    /// `shuffle`, whenever the last one is used up).
    pub fn next<R: Rng + ?Sized>(&mut self, n: usize, len: usize, shuffle: bool, rng: &mut R) -> Vec<usize> {
        (0..n)
            .map(|_| {
                if self.cursor >= self.order.len() {
                    if !self.order.is_empty() {
                        self.epoch += 1;
                    }
                    self.order = (0..len).collect();
                    if shuffle {
                        self.order.shuffle(rng);
                    }
                    self.cursor = 0;
                }
                self.cursor += 1;
                self.order[self.cursor - 1]
            })
            .collect()
    }
}
