//! [`Palette`]: an ALE game's colours, learned from its own frames, so that a frame can be read
//! out as palette indices (`ale.getScreen`: one byte a pixel) and turned into the RGB frame
//! `ale.getScreenRGB` would have written, without ALE's own conversion and the copies around it.
//!
//! ALE's RGB frame is a pure function of its index frame: each pixel's RGB is the entry of the
//! game's palette (NTSC, PAL or SECAM, fixed when the ROM is loaded) at the pixel's index
//! (`ColourPalette::applyPaletteRGB`; with colour averaging ALE maps the blended colours back to
//! indices, but [`crate::atari`] leaves the palette out there as a precaution). The palette is
//! not exposed to Python, so it is learned: a frame with an index not seen before is read
//! through ALE's conversion, and its pixels teach the palette their colours. An index that once
//! shows two colours retires the palette for good ([`Palette::expand`] then always declines),
//! so a frame is only ever ALE's own RGB or the palette's equal of it.

/// The mark of a palette entry not learned yet (no RGB value has bit 24 set).
const UNKNOWN: u32 = 1 << 24;

/// The RGB colour of each of the 256 palette indices a game has shown (module docs).
#[derive(Clone, Debug)]
pub(crate) struct Palette {
    /// `r | g << 8 | b << 16` by index, or [`UNKNOWN`].
    rgb: [u32; 256],
    /// False once an index was seen with two colours: then the palette is not used.
    consistent: bool,
}

impl Palette {
    /// A palette that knows no colour yet.
    pub(crate) fn new() -> Palette {
        Palette { rgb: [UNKNOWN; 256], consistent: true }
    }

    /// Writes the RGB frame of `indices` into `rgb` (`[pixels, 3]`) and returns true when every
    /// index is known; false otherwise (`rgb` is then partly written: read the frame from ALE
    /// and [`Palette::learn`] it) and always once the palette is retired.
    pub(crate) fn expand(&self, indices: &[u8], rgb: &mut [u8]) -> bool {
        if !self.consistent || rgb.len() != 3 * indices.len() {
            return false;
        }
        let mut seen = 0u32;
        for (px, &i) in rgb.chunks_exact_mut(3).zip(indices) {
            let c = self.rgb[usize::from(i)];
            seen |= c;
            px.copy_from_slice(&c.to_le_bytes()[..3]);
        }
        seen & UNKNOWN == 0
    }

    /// Learns the colours of the frame whose indices are `indices` and whose RGB (as ALE
    /// converted it) is `rgb`; an index already known with another colour retires the palette.
    pub(crate) fn learn(&mut self, indices: &[u8], rgb: &[u8]) {
        if rgb.len() != 3 * indices.len() {
            self.consistent = false;
            return;
        }
        for (px, &i) in rgb.chunks_exact(3).zip(indices) {
            let c = u32::from_le_bytes([px[0], px[1], px[2], 0]);
            let entry = &mut self.rgb[usize::from(i)];
            if *entry == UNKNOWN {
                *entry = c;
            } else if *entry != c {
                self.consistent = false;
            }
        }
    }

    /// Whether the palette is still used (no index has shown two colours).
    pub(crate) fn in_use(&self) -> bool {
        self.consistent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up palette: index i ↦ (i, 255 − i, i / 2).
    fn colour(i: u8) -> [u8; 3] {
        [i, 255 - i, i / 2]
    }

    fn rgb_of(indices: &[u8]) -> Vec<u8> {
        indices.iter().flat_map(|&i| colour(i)).collect()
    }

    #[test]
    fn a_frame_of_learned_colours_expands_to_the_rgb_it_was_learned_from() {
        let mut p = Palette::new();
        let first: Vec<u8> = (0..=255u8).step_by(2).chain([0, 2, 4]).collect();
        let mut out = vec![0u8; 3 * first.len()];
        assert!(!p.expand(&first, &mut out), "nothing is known yet");
        p.learn(&first, &rgb_of(&first));
        let later: Vec<u8> = first.iter().rev().copied().collect();
        let mut out = vec![0u8; 3 * later.len()];
        assert!(p.expand(&later, &mut out));
        assert_eq!(out, rgb_of(&later));
    }

    #[test]
    fn an_index_not_seen_before_declines_until_learned() {
        let mut p = Palette::new();
        p.learn(&[10, 20], &rgb_of(&[10, 20]));
        let frame = [10, 20, 30, 10];
        let mut out = vec![0u8; 12];
        assert!(!p.expand(&frame, &mut out), "30 was never shown");
        p.learn(&frame, &rgb_of(&frame));
        assert!(p.expand(&frame, &mut out));
        assert_eq!(out, rgb_of(&frame));
    }

    #[test]
    fn an_index_with_two_colours_retires_the_palette() {
        let mut p = Palette::new();
        p.learn(&[7, 8], &rgb_of(&[7, 8]));
        let mut other = rgb_of(&[7, 8]);
        other[0] ^= 1; // index 7 now shows another red
        p.learn(&[7, 8], &other);
        assert!(!p.in_use());
        let mut out = vec![0u8; 6];
        assert!(!p.expand(&[7, 8], &mut out), "a retired palette never expands");
    }

    #[test]
    fn frames_of_mismatched_sizes_are_declined() {
        let mut p = Palette::new();
        p.learn(&[1, 2], &rgb_of(&[1, 2]));
        assert!(!p.expand(&[1, 2], &mut [0u8; 5]));
        p.learn(&[1, 2], &[0u8; 5]);
        assert!(!p.in_use());
    }
}
