//! `render_mode="rgb_array"` for the native environments, and recording frames to GIF / MP4.
//!
//! The native classic-control envs draw the same scenes as Gymnasium's pygame renderers
//! (same canvas sizes, scales, shapes and colours; no anti-aliasing) with the small rasteriser
//! in [`Canvas`]. Bridged Gymnasium envs return whatever their own `render()` draws.

use crate::error::{EnvError, Result};
use std::io::Write;
use std::path::Path;

/// One RGB frame: `rgb` is `[height, width, 3]` u8, row-major, top row first (as
/// `env.render()` returns it in Gymnasium).
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    pub width: usize,
    pub height: usize,
    pub rgb: Vec<u8>,
}

/// An RGB colour.
pub type Rgb = [u8; 3];

/// A drawing surface with pygame-after-flip coordinates: x to the right, **y up**, in pixels,
/// origin at the bottom-left corner (Gymnasium's classic-control renderers draw in this frame
/// and flip the surface vertically at the end).
pub struct Canvas {
    width: usize,
    height: usize,
    rgb: Vec<u8>,
}

impl Canvas {
    /// A `width` × `height` canvas filled with `background`.
    pub fn new(width: usize, height: usize, background: Rgb) -> Canvas {
        Canvas { width, height, rgb: background.iter().copied().cycle().take(width * height * 3).collect() }
    }

    fn put(&mut self, x: i64, y: i64, c: Rgb) {
        if x >= 0 && y >= 0 && (x as usize) < self.width && (y as usize) < self.height {
            let row = self.height - 1 - y as usize;
            let i = (row * self.width + x as usize) * 3;
            self.rgb[i..i + 3].copy_from_slice(&c);
        }
    }

    /// Fills a simple polygon (even–odd rule, tested at pixel centres).
    pub fn polygon(&mut self, pts: &[(f64, f64)], c: Rgb) {
        if pts.len() < 3 {
            return;
        }
        let (x0, x1) = pts.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.0), b.max(p.0)));
        let (y0, y1) = pts.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.1), b.max(p.1)));
        let (x0, x1) = ((x0.floor() as i64).max(0), (x1.ceil() as i64).min(self.width as i64 - 1));
        let (y0, y1) = ((y0.floor() as i64).max(0), (y1.ceil() as i64).min(self.height as i64 - 1));
        for y in y0..=y1 {
            let py = y as f64 + 0.5;
            for x in x0..=x1 {
                let px = x as f64 + 0.5;
                let mut inside = false;
                let mut j = pts.len() - 1;
                for i in 0..pts.len() {
                    let (a, b) = (pts[i], pts[j]);
                    if (a.1 > py) != (b.1 > py) && px < (b.0 - a.0) * (py - a.1) / (b.1 - a.1) + a.0 {
                        inside = !inside;
                    }
                    j = i;
                }
                if inside {
                    self.put(x, y, c);
                }
            }
        }
    }

    /// Fills a disc of radius `r` centred at (`cx`, `cy`).
    pub fn circle(&mut self, cx: f64, cy: f64, r: f64, c: Rgb) {
        let r = r.max(0.5);
        for y in (cy - r).floor() as i64..=(cy + r).ceil() as i64 {
            for x in (cx - r).floor() as i64..=(cx + r).ceil() as i64 {
                let (dx, dy) = (x as f64 + 0.5 - cx, y as f64 + 0.5 - cy);
                if dx * dx + dy * dy <= r * r {
                    self.put(x, y, c);
                }
            }
        }
    }

    /// A straight line `width` pixels thick (at least one pixel).
    pub fn line(&mut self, a: (f64, f64), b: (f64, f64), width: f64, c: Rgb) {
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let len = (dx * dx + dy * dy).sqrt().max(1e-9);
        let h = width.max(1.0) / 2.0;
        let (nx, ny) = (-dy / len * h, dx / len * h);
        self.polygon(&[(a.0 + nx, a.1 + ny), (b.0 + nx, b.1 + ny), (b.0 - nx, b.1 - ny), (a.0 - nx, a.1 - ny)], c);
    }

    /// A polyline through `pts`.
    pub fn polyline(&mut self, pts: &[(f64, f64)], width: f64, c: Rgb) {
        for w in pts.windows(2) {
            self.line(w[0], w[1], width, c);
        }
    }

    /// The finished frame (top row first).
    pub fn finish(self) -> Frame {
        Frame { width: self.width, height: self.height, rgb: self.rgb }
    }
}

/// Rotates `(x, y)` by `angle` radians counter-clockwise, then translates by `(tx, ty)`
/// (pygame's `Vector2.rotate_rad` followed by a shift).
pub fn rotate(p: (f64, f64), angle: f64, tx: f64, ty: f64) -> (f64, f64) {
    let (s, c) = angle.sin_cos();
    (p.0 * c - p.1 * s + tx, p.0 * s + p.1 * c + ty)
}

/// Streams frames into an animation file, one frame at a time (a 1000-step MuJoCo episode
/// at 480×480 would be 690 MB held in memory): `.gif` through the `gif` crate (each frame
/// mapped onto one 256-colour palette learnt from the first frame), `.mp4` by piping raw RGB to `ffmpeg` (which must be on
/// `PATH`). Frames go to a temporary file that [`VideoWriter::finish`] renames into place, like
/// checkpoints; a writer dropped unfinished removes it.
pub struct VideoWriter {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    fps: u32,
    sink: Option<Sink>,
    size: (usize, usize),
    frames: usize,
}

enum Sink {
    Gif(gif::Encoder<std::io::BufWriter<std::fs::File>>, Box<Palette>),
    Mp4(std::process::Child),
}

impl VideoWriter {
    /// Prepares to write `path` at `fps` frames per second (clamped to 1–100).
    ///
    /// # Errors
    /// `InvalidArgument` for an extension other than `.gif` / `.mp4`.
    pub fn new(path: &Path, fps: u32) -> Result<VideoWriter> {
        let ext = path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).unwrap_or_default();
        if ext != "gif" && ext != "mp4" {
            return Err(EnvError::InvalidArgument(format!(
                "{}: unknown video format; use a .gif or .mp4 file name",
                path.display()
            )));
        }
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        let tmp = dir.join(format!(".{name}.tmp.{}.{ext}", std::process::id()));
        Ok(VideoWriter { path: path.to_path_buf(), tmp, fps: fps.clamp(1, 100), sink: None, size: (0, 0), frames: 0 })
    }

    /// Number of frames written so far.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Appends one frame; the first frame fixes the size.
    ///
    /// # Errors
    /// `InvalidArgument` for a frame of another size (or an inconsistent buffer), `Io` when
    /// writing fails, `Unsupported` for `.mp4` without `ffmpeg`.
    pub fn push(&mut self, f: &Frame) -> Result<()> {
        if f.rgb.len() != f.width * f.height * 3 {
            return Err(EnvError::InvalidArgument(format!(
                "a {}x{} frame needs {} bytes, got {}",
                f.width,
                f.height,
                f.width * f.height * 3,
                f.rgb.len()
            )));
        }
        let io = |p: &Path, e: std::io::Error| EnvError::io(p, e);
        if self.sink.is_none() {
            self.size = (f.width, f.height);
            self.sink = Some(if self.tmp.extension().is_some_and(|e| e == "gif") {
                if f.width > u16::MAX as usize || f.height > u16::MAX as usize {
                    return Err(EnvError::InvalidArgument(format!(
                        "frames of {}x{} are too large for a GIF",
                        f.width, f.height
                    )));
                }
                let file = std::fs::File::create(&self.tmp).map_err(|e| io(&self.path, e))?;
                let palette = Palette::learn(&f.rgb);
                let mut enc =
                    gif::Encoder::new(std::io::BufWriter::new(file), f.width as u16, f.height as u16, &palette.colors)
                        .map_err(|e| gif_err(&self.path, e))?;
                enc.set_repeat(gif::Repeat::Infinite).map_err(|e| gif_err(&self.path, e))?;
                Sink::Gif(enc, Box::new(palette))
            } else {
                let child = std::process::Command::new("ffmpeg")
                    .args([
                        "-loglevel",
                        "error",
                        "-y",
                        "-f",
                        "rawvideo",
                        "-pix_fmt",
                        "rgb24",
                        "-s",
                        &format!("{}x{}", f.width, f.height),
                        "-r",
                        &self.fps.to_string(),
                        "-i",
                        "-",
                    ])
                    .args(["-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-pix_fmt", "yuv420p", "-f", "mp4"])
                    .arg(&self.tmp)
                    .stdin(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| {
                        EnvError::Unsupported(format!(
                            "writing MP4 needs `ffmpeg` on PATH ({e}); write a .gif instead, or install ffmpeg"
                        ))
                    })?;
                Sink::Mp4(child)
            });
        }
        if (f.width, f.height) != self.size {
            return Err(EnvError::InvalidArgument(format!(
                "frames change size ({}x{} then {}x{}); cannot write one video",
                self.size.0, self.size.1, f.width, f.height
            )));
        }
        match self.sink.as_mut().expect("sink opened above") {
            Sink::Gif(enc, palette) => {
                let mut frame = gif::Frame {
                    width: f.width as u16,
                    height: f.height as u16,
                    buffer: std::borrow::Cow::Owned(palette.indices(&f.rgb)),
                    ..gif::Frame::default()
                };
                frame.delay = ((100.0 / self.fps as f64).round() as u16).max(2); // GIF delays are in 1/100 s
                enc.write_frame(&frame).map_err(|e| gif_err(&self.path, e))?;
            }
            Sink::Mp4(child) => {
                child.stdin.as_mut().expect("piped stdin").write_all(&f.rgb).map_err(|e| io(&self.path, e))?;
            }
        }
        self.frames += 1;
        Ok(())
    }

    /// Flushes, syncs and renames the file into place; returns the number of frames.
    ///
    /// # Errors
    /// `InvalidArgument` when no frame was pushed; `Io` when writing fails.
    pub fn finish(mut self) -> Result<usize> {
        let path = self.path.clone();
        match self.sink.take() {
            None => return Err(EnvError::InvalidArgument(format!("{}: no frames to write", path.display()))),
            Some(Sink::Gif(enc, _)) => {
                let mut out = enc.into_inner().map_err(|e| EnvError::io(&path, e))?;
                out.flush().map_err(|e| EnvError::io(&path, e))?;
                out.get_ref().sync_all().map_err(|e| EnvError::io(&path, e))?;
            }
            Some(Sink::Mp4(mut child)) => {
                drop(child.stdin.take());
                let status = child.wait().map_err(|e| EnvError::io(&path, e))?;
                if !status.success() {
                    return Err(EnvError::io(&path, std::io::Error::other(format!("ffmpeg failed ({status})"))));
                }
            }
        }
        std::fs::rename(&self.tmp, &path).map_err(|e| EnvError::io(&path, e))?;
        Ok(self.frames)
    }
}

impl Drop for VideoWriter {
    fn drop(&mut self) {
        if let Some(Sink::Mp4(mut child)) = self.sink.take() {
            drop(child.stdin.take());
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.tmp);
    }
}

/// A 256-colour palette learnt (NeuQuant) from the first frame, with a lookup table over
/// 15-bit colours so that every later frame is mapped in one table lookup per pixel
/// (re-quantising each 480×480 frame took ≈130 ms; this takes ≈1 ms).
struct Palette {
    colors: Vec<u8>,
    lut: Vec<u8>,
}

impl Palette {
    fn learn(rgb: &[u8]) -> Palette {
        let rgba: Vec<u8> = rgb.chunks_exact(3).flat_map(|p| [p[0], p[1], p[2], 255]).collect();
        let nq = color_quant::NeuQuant::new(10, 256, &rgba);
        let colors = nq.color_map_rgb();
        let lut = (0..32768u32)
            .map(|c| {
                let ch = |shift: u32| (((c >> shift) & 31) << 3 | 4) as u8;
                nq.index_of(&[ch(10), ch(5), ch(0), 255]) as u8
            })
            .collect();
        Palette { colors, lut }
    }
    fn indices(&self, rgb: &[u8]) -> Vec<u8> {
        rgb.chunks_exact(3)
            .map(|p| self.lut[((p[0] as usize >> 3) << 10) | ((p[1] as usize >> 3) << 5) | (p[2] as usize >> 3)])
            .collect()
    }
}

fn gif_err(path: &Path, e: gif::EncodingError) -> EnvError {
    EnvError::io(path, std::io::Error::other(e.to_string()))
}

/// The classic-control scenes, drawn as Gymnasium 1.4's `render()` draws them.
pub(crate) mod scenes {
    use super::{rotate, Canvas, Frame};
    const WHITE: [u8; 3] = [255, 255, 255];
    const BLACK: [u8; 3] = [0, 0, 0];

    /// CartPole: 600×400, cart at 100 px, pole 2·0.5 m long (`cartpole.py`).
    pub fn cartpole(s: &[f64]) -> Frame {
        let w = 600.0;
        let scale = w / (2.4 * 2.0);
        let (polewidth, polelen, cartwidth, cartheight) = (10.0, scale * 1.0, 50.0, 30.0);
        let mut c = Canvas::new(600, 400, WHITE);
        let (cartx, carty) = (s[0] * scale + w / 2.0, 100.0);
        let (l, r, t, b) = (-cartwidth / 2.0, cartwidth / 2.0, cartheight / 2.0, -cartheight / 2.0);
        c.polygon(
            &[(l + cartx, b + carty), (l + cartx, t + carty), (r + cartx, t + carty), (r + cartx, b + carty)],
            BLACK,
        );
        let axleoffset = cartheight / 4.0;
        let (l, r, t, b) = (-polewidth / 2.0, polewidth / 2.0, polelen - polewidth / 2.0, -polewidth / 2.0);
        let pole: Vec<_> =
            [(l, b), (l, t), (r, t), (r, b)].iter().map(|&p| rotate(p, -s[2], cartx, carty + axleoffset)).collect();
        c.polygon(&pole, [202, 152, 101]);
        c.circle(cartx, carty + axleoffset, polewidth / 2.0, [129, 132, 203]);
        c.line((0.0, carty), (w, carty), 1.0, BLACK);
        c.finish()
    }

    /// Pendulum: 500×500, rod of 1 m from the centre, θ = 0 pointing up (`pendulum.py`;
    /// the torque arrow image is not drawn).
    pub fn pendulum(s: &[f64]) -> Frame {
        let mut c = Canvas::new(500, 500, WHITE);
        let scale = 500.0 / (2.2 * 2.0);
        let offset = 250.0;
        let (rod_length, rod_width) = (1.0 * scale, 0.2 * scale);
        let (l, r, t, b) = (0.0, rod_length, rod_width / 2.0, -rod_width / 2.0);
        let angle = s[0] + std::f64::consts::FRAC_PI_2;
        let rod: Vec<_> = [(l, b), (l, t), (r, t), (r, b)].iter().map(|&p| rotate(p, angle, offset, offset)).collect();
        let color = [204, 77, 77];
        c.polygon(&rod, color);
        c.circle(offset, offset, rod_width / 2.0, color);
        let end = rotate((rod_length, 0.0), angle, offset, offset);
        c.circle(end.0, end.1, rod_width / 2.0, color);
        c.circle(offset, offset, 0.05 * scale, BLACK);
        c.finish()
    }

    /// MountainCar (and its continuous twin): 600×400, the hill y = 0.45 sin(3x) + 0.55, the car
    /// tilted with the slope, the flag at `goal` (`mountain_car.py`).
    pub fn mountain_car(pos: f64, goal: f64) -> Frame {
        let (min_position, max_position) = (-1.2, 0.6);
        let scale = 600.0 / (max_position - min_position);
        let height = |x: f64| (3.0 * x).sin() * 0.45 + 0.55;
        let (carwidth, carheight, clearance) = (40.0, 20.0, 10.0);
        let mut c = Canvas::new(600, 400, WHITE);
        let hill: Vec<_> = (0..100)
            .map(|i| min_position + (max_position - min_position) * i as f64 / 99.0)
            .map(|x| ((x - min_position) * scale, height(x) * scale))
            .collect();
        c.polyline(&hill, 1.0, BLACK);
        let (l, r, t, b) = (-carwidth / 2.0, carwidth / 2.0, carheight, 0.0);
        let (tx, ty) = ((pos - min_position) * scale, clearance + height(pos) * scale);
        let angle = (3.0 * pos).cos();
        let car: Vec<_> = [(l, b), (l, t), (r, t), (r, b)].iter().map(|&p| rotate(p, angle, tx, ty)).collect();
        c.polygon(&car, BLACK);
        for wx in [carwidth / 4.0, -carwidth / 4.0] {
            let wheel = rotate((wx, 0.0), angle, tx, ty);
            c.circle(wheel.0, wheel.1, carheight / 2.5, [128, 128, 128]);
        }
        let flagx = (goal - min_position) * scale;
        let flagy1 = height(goal) * scale;
        let flagy2 = flagy1 + 50.0;
        c.line((flagx, flagy1), (flagx, flagy2), 1.0, BLACK);
        c.polygon(&[(flagx, flagy2), (flagx, flagy2 - 10.0), (flagx + 25.0, flagy2 - 5.0)], [204, 204, 0]);
        c.finish()
    }

    /// Acrobot: 500×500, two 1 m links hanging from the centre, the goal line 1 m above the
    /// pivot (`acrobot.py`).
    pub fn acrobot(s: &[f64]) -> Frame {
        let (l1, l2) = (1.0, 1.0);
        let bound = l1 + l2 + 0.2;
        let scale = 500.0 / (bound * 2.0);
        let offset = 250.0;
        let mut c = Canvas::new(500, 500, WHITE);
        let p1 = (-l1 * s[0].cos() * scale, l1 * s[0].sin() * scale);
        let p2 = (p1.0 - l2 * (s[0] + s[1]).cos() * scale, p1.1 + l2 * (s[0] + s[1]).sin() * scale);
        // Gymnasium swaps the coordinates: xys = [[0,0], p1, p2][:, ::-1].
        let xys = [(0.0, 0.0), (p1.1, p1.0), (p2.1, p2.0)];
        let thetas = [s[0] - std::f64::consts::FRAC_PI_2, s[0] + s[1] - std::f64::consts::FRAC_PI_2];
        c.line((-2.2 * scale + offset, scale + offset), (2.2 * scale + offset, scale + offset), 1.0, BLACK);
        for ((x, y), (th, len)) in xys[..2].iter().zip(thetas.iter().zip([l1 * scale, l2 * scale])) {
            let (x, y) = (x + offset, y + offset);
            let (l, r, t, b) = (0.0, len, 0.1 * scale, -0.1 * scale);
            let link: Vec<_> = [(l, b), (l, t), (r, t), (r, b)].iter().map(|&p| rotate(p, *th, x, y)).collect();
            c.polygon(&link, [0, 204, 204]);
            c.circle(x, y, 0.1 * scale, [204, 204, 0]);
        }
        c.finish()
    }
}
