//! The Atari frame operations against OpenCV itself: `cv2.cvtColor(…, COLOR_RGB2GRAY)` and
//! `cv2.resize(…, INTER_AREA)` byte for byte, on random frames, all-white and black-and-white
//! frames, at the sizes Atari preprocessing uses (210 × 160 → 84 × 84) and others.
//!
//! Needs a Python with `numpy` and `opencv-python` (CI installs `opencv-python-headless` into its
//! test venv), named by `PROXIMA_PYTHON` or found as `python3`: ignored by a plain `cargo test`,
//! run by `cargo test -- --include-ignored` (as `.ci/run` does), where it fails without them.

use proxima_env::atari::{rgb_to_gray, AreaResize};
use std::path::Path;
use std::process::Command;

/// (source height, width) → (output height, width) pairs checked, all shrinking by a
/// non-whole factor on at least one side.
const SIZES: [(usize, usize, usize, usize); 4] =
    [(210, 160, 84, 84), (210, 160, 64, 64), (210, 160, 72, 96), (250, 160, 84, 84)];
const FRAMES: usize = 8;

/// Writes, per size, `FRAMES` RGB frames and cv2's gray and resized images as raw bytes.
const SCRIPT: &str = r#"
import sys, numpy as np, cv2
out, sizes, n = sys.argv[1], [tuple(map(int, s.split('x'))) for s in sys.argv[2:]], 8
rng = np.random.default_rng(20261202)
for (sh, sw, dh, dw) in sizes:
    frames = []
    for k in range(n):
        f = rng.integers(0, 256, (sh, sw, 3), dtype=np.uint8)
        if k == 1: f[:] = 255
        if k == 2: f = (rng.integers(0, 2, (sh, sw, 3)) * 255).astype(np.uint8)
        if k == 3: f = np.broadcast_to(np.arange(sw, dtype=np.uint8)[None, :, None], (sh, sw, 3)).copy()
        frames.append(f)
    rgb = np.stack(frames)
    gray = np.stack([cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames])
    small = np.stack([cv2.resize(g, (dw, dh), interpolation=cv2.INTER_AREA) for g in gray])
    tag = f"{sh}x{sw}x{dh}x{dw}"
    for name, a in (("rgb", rgb), ("gray", gray), ("small", small)):
        open(f"{out}/{tag}.{name}", "wb").write(np.ascontiguousarray(a).tobytes())
"#;

fn python() -> String {
    std::env::var("PROXIMA_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Runs [`SCRIPT`] into `dir`; panics when the Python lacks cv2.
fn opencv_reference(dir: &Path) {
    let py = python();
    let has = Command::new(&py).args(["-c", "import numpy, cv2"]).output().map(|o| o.status.success());
    assert!(
        has.is_ok_and(|ok| ok),
        "{py} cannot `import numpy, cv2`: this test needs them (pip install opencv-python-headless, or set PROXIMA_PYTHON)"
    );
    let sizes = SIZES.iter().map(|(a, b, c, d)| format!("{a}x{b}x{c}x{d}"));
    let out = Command::new(&py).args(["-c", SCRIPT, dir.to_str().unwrap()]).args(sizes).output().unwrap();
    assert!(out.status.success(), "the cv2 script failed: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
#[ignore = "needs a Python with numpy and opencv-python (PROXIMA_PYTHON; .ci/run installs them)"]
fn gray_and_area_resize_equal_opencv_byte_for_byte() {
    let dir = std::env::temp_dir().join(format!("proxima-atari-frames-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    opencv_reference(&dir);
    for (sh, sw, dh, dw) in SIZES {
        let read = |name: &str| std::fs::read(dir.join(format!("{sh}x{sw}x{dh}x{dw}.{name}"))).unwrap();
        let (rgb, gray, small) = (read("rgb"), read("gray"), read("small"));
        assert_eq!(small.len(), FRAMES * dh * dw);
        let mut resize = AreaResize::new(sh, sw, dh, dw).unwrap();
        let (mut g, mut s) = (vec![0u8; sh * sw], vec![0u8; dh * dw]);
        for k in 0..FRAMES {
            rgb_to_gray(&rgb[k * sh * sw * 3..(k + 1) * sh * sw * 3], &mut g).unwrap();
            let want = &gray[k * sh * sw..(k + 1) * sh * sw];
            let bad = g.iter().zip(want).filter(|(a, b)| a != b).count();
            assert_eq!(bad, 0, "{sh}×{sw} frame {k}: {bad} gray pixels differ from cv2");
            resize.apply(want, &mut s).unwrap();
            let want = &small[k * dh * dw..(k + 1) * dh * dw];
            let bad: Vec<_> = (0..dh * dw).filter(|&i| s[i] != want[i]).collect();
            assert!(
                bad.is_empty(),
                "{sh}×{sw}→{dh}×{dw} frame {k}: {} pixels differ, first at {:?}",
                bad.len(),
                bad.first()
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
