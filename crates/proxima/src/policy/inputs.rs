//! SB3's `MultiInputPolicy` over a `Dict` observation with image keys (its `CombinedExtractor`):
//! the flat observation's top-level keys in order, a non-image key's values read as they are
//! (Gymnasium's flattening: `Box` values, `Discrete` one-hot), an image key's pixels through a
//! Nature CNN of its own to [`COMBINED_CNN_FEATURES`] features; the concatenation is what the MLP
//! towers (or a recurrent stack) read. Only a spec with an image key carries its inputs
//! ([`crate::policy::PolicySpec::inputs`]): a `Dict` observation without images is read flat.

use crate::env::ObsKey;
use serde::{Deserialize, Serialize};

/// Features of each image key's CNN (SB3's `CombinedExtractor(cnn_output_dim=256)`).
pub const COMBINED_CNN_FEATURES: usize = 256;

/// One top-level key of the observation as the policy reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputKey {
    /// The key (a `Tuple`'s index, as text); it names the key's CNN parameters.
    pub name: String,
    /// Its number of flat values.
    pub len: usize,
    /// An image key's layout; `None`: its values go to the towers as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<InputImage>,
}

/// An image key's pixels: `[channels, height, width]`, stored `[H, W, C]` when `channels_last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputImage {
    /// Channels, height, width.
    pub chw: [usize; 3],
    /// The pixels are `[H, W, C]` (else `[C, H, W]`).
    pub channels_last: bool,
}

impl InputKey {
    /// The features this key gives the towers: [`COMBINED_CNN_FEATURES`] for an image, else its
    /// values.
    pub fn features(&self) -> usize {
        if self.image.is_some() {
            COMBINED_CNN_FEATURES
        } else {
            self.len
        }
    }
}

/// The policy's inputs for an env's observation keys: every key when one of them is an image,
/// none otherwise (the towers then read the flat observation).
pub fn inputs_of(keys: &[ObsKey]) -> Vec<InputKey> {
    if !keys.iter().any(|k| k.image.is_some()) {
        return Vec::new();
    }
    keys.iter()
        .map(|k| InputKey {
            name: k.name.clone(),
            len: k.len,
            image: k.image.map(|i| InputImage { chw: i.chw, channels_last: i.channels_last }),
        })
        .collect()
}

/// The width of what the towers read: the keys' features side by side.
pub fn features_dim(inputs: &[InputKey]) -> usize {
    inputs.iter().map(InputKey::features).sum()
}
