//! `MultiInputPolicy` over a `Dict` observation with an image key (SB3's `CombinedExtractor`,
//! `policy::inputs`): the image's Nature CNN reads a channel-last key exactly as it reads the
//! same pixels channel-first (what SB3's `VecTransposeImage` gives its CNN; the channel-first CNN
//! is checked against PyTorch in `tests/cnn.rs`), the losses' gradients reach it, and specs that
//! do not fit are errors.

use candle_core::{Device, Tensor};
use proxima::policy::inputs::{InputImage, InputKey};
use proxima::policy::{ActionKind, ActorCritic, PolicySpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const C: usize = 3;
const SIDE: usize = 36;
const PIXELS: usize = C * SIDE * SIDE;

fn spec(channels_last: bool) -> PolicySpec {
    let inputs = vec![
        InputKey { name: "pos".into(), len: 3, image: None },
        InputKey {
            name: "screen".into(),
            len: PIXELS,
            image: Some(InputImage { chw: [C, SIDE, SIDE], channels_last }),
        },
    ];
    PolicySpec { inputs, ..PolicySpec::mlp(3 + PIXELS, ActionKind::Discrete { n: 4 }, vec![16]) }
}

/// B observations: `pos` then the pixels, channel-first `[C, H, W]` and channel-last `[H, W, C]`.
fn observations(b: usize) -> (Vec<f32>, Vec<f32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (mut chw, mut hwc) = (Vec::new(), Vec::new());
    for _ in 0..b {
        let pos: Vec<f32> = (0..3).map(|_| rng.random_range(-1.0..1.0)).collect();
        let img: Vec<f32> = (0..PIXELS).map(|_| f32::from(rng.random::<u8>())).collect();
        chw.extend(&pos);
        chw.extend(&img);
        hwc.extend(&pos);
        for y in 0..SIDE {
            for x in 0..SIDE {
                hwc.extend((0..C).map(|c| img[(c * SIDE + y) * SIDE + x]));
            }
        }
    }
    (chw, hwc)
}

/// The same weights (one seed, one parameter layout) on a channel-last key and on the same
/// pixels channel-first: the same π head and V(s), and the same gradient of every parameter.
#[test]
fn a_channel_last_image_key_is_read_as_its_channel_first_pixels() {
    let last = ActorCritic::new(spec(true), &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
    let first = ActorCritic::new(spec(false), &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
    let (chw, hwc) = observations(4);
    let run = |net: &ActorCritic, obs: &[f32]| {
        let x = Tensor::from_slice(obs, (4, 3 + PIXELS), &Device::Cpu).unwrap();
        let (head, values) = net.forward(&x).unwrap();
        let loss = (head.sqr().unwrap().sum_all().unwrap() + values.sum_all().unwrap()).unwrap();
        let grads = loss.backward().unwrap();
        let g: Vec<Vec<f32>> = net
            .named_params()
            .iter()
            .map(|(_, v)| grads.get(v.as_tensor()).unwrap().flatten_all().unwrap().to_vec1().unwrap())
            .collect();
        (head.flatten_all().unwrap().to_vec1::<f32>().unwrap(), values.to_vec1::<f32>().unwrap(), g)
    };
    let (h1, v1, g1) = run(&last, &hwc);
    let (h2, v2, g2) = run(&first, &chw);
    let close = |a: &[f32], b: &[f32], what: &str| {
        let scale = b.iter().fold(1e-6f32, |m, x| m.max(x.abs()));
        let err = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(err <= 1e-5 * scale, "{what}: max difference {err} at scale {scale}");
    };
    close(&h1, &h2, "π head");
    close(&v1, &v2, "V(s)");
    for (((name, _), a), b) in last.named_params().iter().zip(&g1).zip(&g2) {
        close(a, b, name);
        assert!(a.iter().any(|&v| v != 0.0), "{name}: no gradient");
    }
    let names: Vec<&str> = last.named_params().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(&names[..2], ["extractors.screen.cnn.0.weight", "extractors.screen.cnn.0.bias"]);
    assert!(names.contains(&"extractors.screen.linear.0.weight"));
    let actor0 = last.named_params().iter().find(|(n, _)| n == "actor.0.weight").unwrap();
    assert_eq!(actor0.1.dims(), [16, 256 + 3], "the towers read the CNN's 256 features and the pos key");
}

/// Inputs that do not fit are errors: keys that do not add up to the observation, an image of
/// the wrong size or too small for the Nature CNN, and image keys beside a CNN policy.
#[test]
fn inputs_that_do_not_fit_are_errors() {
    let bad = |sp: PolicySpec| {
        ActorCritic::new(sp, &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(0))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let mut sp = spec(true);
    sp.obs_dim += 1;
    assert!(bad(sp).contains("the observation keys hold"));
    let mut sp = spec(true);
    sp.inputs[1].image = Some(InputImage { chw: [C, 12, 108], channels_last: true });
    assert!(bad(sp).contains("too small for the Nature CNN"));
    let mut sp = spec(true);
    sp.inputs[1].image = Some(InputImage { chw: [1, SIDE, SIDE], channels_last: true });
    assert!(bad(sp).contains("does not hold its"));
    let mut sp = spec(true);
    sp.shared_trunk = true;
    assert!(bad(sp).contains("separate MLP towers"));
}
