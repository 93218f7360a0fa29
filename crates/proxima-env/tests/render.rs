//! Native `render()` (rgb_array) and the GIF writer.

use proxima_env::render::{Frame, VideoWriter};
use proxima_env::{make, make_with, Action};

fn px(f: &Frame, x: usize, y_from_bottom: usize) -> [u8; 3] {
    let row = f.height - 1 - y_from_bottom;
    let i = (row * f.width + x) * 3;
    [f.rgb[i], f.rgb[i + 1], f.rgb[i + 2]]
}

#[test]
fn frames_have_gymnasiums_sizes_and_fps() {
    for (id, w, h, fps) in [
        ("CartPole-v1", 600, 400, 50),
        ("Acrobot-v1", 500, 500, 15),
        ("MountainCar-v0", 600, 400, 30),
        ("MountainCarContinuous-v0", 600, 400, 30),
        ("Pendulum-v1", 500, 500, 30),
    ] {
        let mut env = make(id).unwrap();
        env.reset(Some(0)).unwrap();
        let f = env.render().unwrap();
        assert_eq!((f.width, f.height, f.rgb.len(), env.render_fps()), (w, h, w * h * 3, fps), "{id}");
        // Something other than the white background is drawn.
        assert!(f.rgb.chunks(3).filter(|p| *p != [255, 255, 255]).count() > 200, "{id} draws nothing");
    }
}

#[test]
fn cartpole_frame_follows_the_state() {
    let mut env = make("CartPole-v1").unwrap();
    env.reset(Some(0)).unwrap();
    // Upright pole at the centre: pole colour above the axle, cart black at (300, 100).
    env.set_state(&[0.0, 0.0, 0.0, 0.0]).unwrap();
    let f = env.render().unwrap();
    assert_eq!(px(&f, 300, 100), [0, 0, 0]);
    assert_eq!(px(&f, 300, 180), [202, 152, 101]);
    // Cart 1 m to the right: 125 px (scale 600 / 4.8); the old place is empty track.
    env.set_state(&[1.0, 0.0, 0.0, 0.0]).unwrap();
    let f = env.render().unwrap();
    assert_eq!(px(&f, 425, 100), [0, 0, 0]);
    assert_eq!(px(&f, 300, 180), [255, 255, 255]);
    // Pole tilted right by θ = 0.5 rad: its tip moves right of the axle.
    env.set_state(&[0.0, 0.0, 0.5, 0.0]).unwrap();
    let f = env.render().unwrap();
    let tip = (300.0 + 100.0 * 0.5f64.sin(), 107.5 + 100.0 * 0.5f64.cos());
    assert_eq!(px(&f, tip.0 as usize, tip.1 as usize), [202, 152, 101]);
    assert_eq!(px(&f, 300, 180), [255, 255, 255]);
}

#[test]
fn rendering_does_not_change_the_dynamics() {
    let run = |render: bool| {
        let mut env = make_with("Pendulum-v1", render).unwrap();
        let (mut o, _) = env.reset(Some(5)).unwrap();
        for t in 0..50 {
            if render {
                env.render().unwrap();
            }
            o = env.step(Action::Continuous(&[((t % 5) as f32 - 2.0) * 0.9])).unwrap().observation;
        }
        o
    };
    assert_eq!(run(false), run(true));
}

fn decode(path: &std::path::Path) -> Vec<(u16, u16, u16, Vec<u8>)> {
    let mut opts = gif::DecodeOptions::new();
    opts.set_color_output(gif::ColorOutput::RGBA);
    let mut d = opts.read_info(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = Vec::new();
    while let Some(f) = d.read_next_frame().unwrap() {
        out.push((f.width, f.height, f.delay, f.buffer.to_vec()));
    }
    out
}

#[test]
fn gif_round_trips_frames_and_timing() {
    let dir = std::env::temp_dir().join(format!("proxima-gif-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cartpole.gif");
    let mut env = make("CartPole-v1").unwrap();
    env.reset(Some(1)).unwrap();
    let mut frames = vec![env.render().unwrap()];
    for _ in 0..4 {
        env.step(Action::Discrete(1)).unwrap();
        frames.push(env.render().unwrap());
    }
    let mut w = VideoWriter::new(&path, 50).unwrap();
    for f in &frames {
        w.push(f).unwrap();
    }
    assert_eq!(w.finish().unwrap(), 5);
    let got = decode(&path);
    assert_eq!(got.len(), 5);
    for ((gw, gh, delay, rgba), f) in got.iter().zip(&frames) {
        assert_eq!((*gw as usize, *gh as usize, *delay), (600, 400, 2));
        // Palette quantisation: each channel within 24 of the source on average.
        let err: u64 = rgba
            .chunks(4)
            .zip(f.rgb.chunks(3))
            .map(|(a, b)| (0..3).map(|c| (a[c] as i64 - b[c] as i64).unsigned_abs()).sum::<u64>())
            .sum();
        assert!(err as f64 / (600.0 * 400.0 * 3.0) < 8.0, "mean abs error {}", err as f64 / (600.0 * 400.0 * 3.0));
    }
    // No temp file left behind.
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("cartpole.gif")]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn video_writer_rejects_bad_input_and_cleans_up() {
    let dir = std::env::temp_dir().join(format!("proxima-gif-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = VideoWriter::new(&dir.join("x.avi"), 30).err().unwrap().to_string();
    assert!(e.contains("use a .gif or .mp4"), "{e}");
    let e = VideoWriter::new(&dir.join("x.gif"), 30).unwrap().finish().unwrap_err().to_string();
    assert!(e.contains("no frames"), "{e}");
    let mut w = VideoWriter::new(&dir.join("y.gif"), 30).unwrap();
    w.push(&Frame { width: 2, height: 2, rgb: vec![9; 12] }).unwrap();
    let e = w.push(&Frame { width: 3, height: 2, rgb: vec![9; 18] }).unwrap_err().to_string();
    assert!(e.contains("frames change size"), "{e}");
    let e = w.push(&Frame { width: 2, height: 2, rgb: vec![9; 5] }).unwrap_err().to_string();
    assert!(e.contains("needs 12 bytes"), "{e}");
    drop(w);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "an unfinished writer leaves nothing");
    let _ = std::fs::remove_dir_all(&dir);
}
