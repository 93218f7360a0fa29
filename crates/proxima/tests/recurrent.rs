//! The recurrent layers of recurrent PPO (`policy::recurrent`) against a float64 reference written
//! here from PyTorch's `nn.LSTM` / `nn.GRU` equations: outputs and final states over sequences
//! with episode starts inside them, one step at a time equal to the whole sequence, a reset equal
//! to a fresh start, and the back-propagated gradient equal to the reference's finite
//! differences — for both implementations: candle's ops step by step (autograd through time) and
//! the fused kernels (one op per layer, `Recurrent::set_kernels`), which also equal each other.

use candle_core::{Device, Tensor};
use proxima::policy::recurrent::{CellKind, Recurrent, RecurrentShape};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const B: usize = 3;
const T: usize = 6;

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `W·x + b` for `W` `[rows, cols]` row-major.
fn affine(w: &[f64], b: &[f64], x: &[f64]) -> Vec<f64> {
    b.iter()
        .enumerate()
        .map(|(r, &bias)| bias + x.iter().enumerate().map(|(c, &v)| w[r * x.len() + c] * v).sum::<f64>())
        .collect()
}

/// One step of one env through the stack, in f64: `state` per layer `[h, c]` or `[h]`.
fn step_ref(shape: &RecurrentShape, params: &[Vec<f64>], x: &[f64], state: &mut [Vec<Vec<f64>>]) -> Vec<f64> {
    let h = shape.hidden;
    let mut input = x.to_vec();
    for (k, s) in state.iter_mut().enumerate() {
        let p = &params[4 * k..4 * k + 4];
        let gi = affine(&p[0], &p[2], &input);
        let gh = affine(&p[1], &p[3], &s[0]);
        match shape.cell {
            CellKind::Lstm => {
                for j in 0..h {
                    let g = |q: usize| gi[q * h + j] + gh[q * h + j];
                    let (i, f, gg, o) = (sigmoid(g(0)), sigmoid(g(1)), g(2).tanh(), sigmoid(g(3)));
                    s[1][j] = f * s[1][j] + i * gg;
                    s[0][j] = o * s[1][j].tanh();
                }
            }
            CellKind::Gru => {
                let prev = s[0].clone();
                for j in 0..h {
                    let r = sigmoid(gi[j] + gh[j]);
                    let z = sigmoid(gi[h + j] + gh[h + j]);
                    let n = (gi[2 * h + j] + r * gh[2 * h + j]).tanh();
                    s[0][j] = (1.0 - z) * n + z * prev[j];
                }
            }
        }
        input = s[0].clone();
    }
    input
}

/// The stack over the time-major sequence `x` `[T·B, in]` with `starts` `[T·B]`, from `state0`
/// `[B, state_dim]`, in f64: outputs `[T·B, H]` and the final state `[B, state_dim]`.
fn sequence_ref(
    shape: &RecurrentShape,
    params: &[Vec<f64>],
    x: &[f64],
    starts: &[f64],
    state0: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let (h, per, sd) = (shape.hidden, shape.cell.states(), shape.state_dim());
    let mut states: Vec<Vec<Vec<Vec<f64>>>> = (0..B)
        .map(|e| {
            (0..shape.layers)
                .map(|k| (0..per).map(|s| state0[e * sd + (k * per + s) * h..][..h].to_vec()).collect())
                .collect()
        })
        .collect();
    let mut out = Vec::new();
    for t in 0..T {
        for (e, st) in states.iter_mut().enumerate() {
            if starts[t * B + e] != 0.0 {
                st.iter_mut().flatten().for_each(|v| v.fill(0.0));
            }
            out.extend(step_ref(shape, params, &x[(t * B + e) * shape.input..][..shape.input], st));
        }
    }
    let fin = states.iter().flat_map(|st| st.iter().flatten().flatten().copied()).collect();
    (out, fin)
}

struct Case {
    shape: RecurrentShape,
    params: Vec<Vec<f32>>,
    x: Vec<f32>,
    starts: Vec<f32>,
    state0: Vec<f32>,
    /// Weights of the scalar loss Σ w·output + Σ v·final state.
    w_out: Vec<f64>,
    w_state: Vec<f64>,
}

fn case(cell: CellKind, layers: usize, seed: u64) -> Case {
    let shape = RecurrentShape { cell, input: 4, hidden: 5, layers };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let params = shape.initial_params(&mut rng);
    let mut u = |n: usize, s: f32| (0..n).map(|_| rng.random_range(-s..s)).collect::<Vec<f32>>();
    let x = u(T * B * shape.input, 1.5);
    let state0 = u(B * shape.state_dim(), 0.8);
    let w_out: Vec<f64> = u(T * B * shape.hidden, 1.0).into_iter().map(f64::from).collect();
    let w_state: Vec<f64> = u(B * shape.state_dim(), 1.0).into_iter().map(f64::from).collect();
    // Episode starts inside the sequence: env 0 at t = 2, env 2 at t = 0 and t = 4.
    let mut starts = vec![0f32; T * B];
    for (t, e) in [(2, 0), (0, 2), (4, 2)] {
        starts[t * B + e] = 1.0;
    }
    Case { shape, params, x, starts, state0, w_out, w_state }
}

/// The stack of case `c` and its sequence: `(net, x [T·B, in], episode starts [T·B], state before step 0)`.
fn inputs(c: &Case, kernels: bool) -> (Recurrent, Tensor, Tensor, proxima::policy::recurrent::RecurrentState) {
    let dev = Device::Cpu;
    let (mut net, _) = Recurrent::new(c.shape, c.params.clone(), &dev).unwrap();
    net.set_kernels(kernels);
    let x = Tensor::from_slice(&c.x, (T * B, c.shape.input), &dev).unwrap();
    let starts = Tensor::from_slice(&c.starts, T * B, &dev).unwrap();
    let s0 = net.state_from_host(&c.state0, B, &dev).unwrap();
    (net, x, starts, s0)
}

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

/// The stack's loss Σ w·out (+ Σ v·final state `with_state`: the kernels' final state is a host
/// value without a gradient, as in training), with the input as a variable.
fn run(c: &Case, kernels: bool, with_state: bool) -> (Recurrent, Vec<candle_core::Var>, Tensor, candle_core::Var) {
    let dev = Device::Cpu;
    let (mut net, vars) = Recurrent::new(c.shape, c.params.clone(), &dev).unwrap();
    net.set_kernels(kernels);
    let x = candle_core::Var::from_slice(&c.x, (T * B, c.shape.input), &dev).unwrap();
    let starts = Tensor::from_slice(&c.starts, T * B, &dev).unwrap();
    let s0 = net.state_from_host(&c.state0, B, &dev).unwrap();
    let (out, fin) = net.sequence(&x, &starts, &s0, B).unwrap();
    // The scalar loss, differentiable: Σ w·out + Σ v·final state.
    let w_out = Tensor::from_vec(c.w_out.iter().map(|&v| v as f32).collect::<Vec<_>>(), out.shape(), &dev).unwrap();
    let parts: Vec<&Tensor> = fin.layers.iter().flatten().collect();
    let fin_t = Tensor::cat(&parts, 1).unwrap();
    let v = |w: &f64| if with_state { *w as f32 } else { 0.0 };
    let w_state = Tensor::from_vec(c.w_state.iter().map(v).collect::<Vec<_>>(), fin_t.shape(), &dev).unwrap();
    let loss =
        ((out.clone() * w_out).unwrap().sum_all().unwrap() + (fin_t * w_state).unwrap().sum_all().unwrap()).unwrap();
    (net, vars, loss, x)
}

fn loss_ref(c: &Case, params: &[Vec<f64>], with_state: bool) -> f64 {
    let (out, fin) = sequence_ref(&c.shape, params, &f64s(&c.x), &f64s(&c.starts), &f64s(&c.state0));
    let state: f64 = fin.iter().zip(&c.w_state).map(|(a, b)| a * b).sum();
    out.iter().zip(&c.w_out).map(|(a, b)| a * b).sum::<f64>() + if with_state { state } else { 0.0 }
}

fn cases() -> Vec<(String, Case)> {
    let mut v = Vec::new();
    for cell in [CellKind::Lstm, CellKind::Gru] {
        for layers in [1, 2] {
            v.push((format!("{cell:?} × {layers}"), case(cell, layers, 7 + layers as u64)));
        }
    }
    v
}

/// Every case on candle's ops and on the fused kernels.
fn both() -> Vec<(String, Case, bool)> {
    [false, true]
        .into_iter()
        .flat_map(|k| cases().into_iter().map(move |(w, c)| (format!("{w} (kernels: {k})"), c, k)))
        .collect()
}

#[test]
fn sequences_with_episode_starts_match_the_float64_reference() {
    for (what, c, kernels) in both() {
        let (net, x, starts, s0) = inputs(&c, kernels);
        let (out, fin) = net.sequence(&x, &starts, &s0, B).unwrap();
        let params: Vec<Vec<f64>> = c.params.iter().map(|p| f64s(p)).collect();
        let (want_out, want_fin) = sequence_ref(&c.shape, &params, &f64s(&c.x), &f64s(&c.starts), &f64s(&c.state0));
        let got_out = out.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let got_fin = net.state_to_host(&fin).unwrap();
        for (name, got, want) in [("outputs", &got_out, &want_out), ("final state", &got_fin, &want_fin)] {
            assert_eq!(got.len(), want.len(), "{what} {name}");
            for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
                assert!((f64::from(*g) - w).abs() <= 2e-6 * (1.0 + w.abs()), "{what} {name}[{i}]: {g} vs {w}");
            }
        }
    }
}

/// Acting runs the stack one step at a time (the state carried on the host between steps,
/// zeroed at episode starts); learning runs it over the sequence: the same bits.
#[test]
fn one_step_at_a_time_is_the_sequence_bit_for_bit() {
    for (what, c, kernels) in both() {
        let (net, x, starts, s0) = inputs(&c, kernels);
        let (seq_out, seq_fin) = net.sequence(&x, &starts, &s0, B).unwrap();
        let seq_out = seq_out.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let mut host = c.state0.clone();
        let (sd, mut outs) = (c.shape.state_dim(), Vec::new());
        for t in 0..T {
            for e in 0..B {
                if c.starts[t * B + e] != 0.0 {
                    host[e * sd..(e + 1) * sd].fill(0.0);
                }
            }
            let st = net.state_from_host(&host, B, &Device::Cpu).unwrap();
            let none_start = Tensor::zeros(B, candle_core::DType::F32, &Device::Cpu).unwrap();
            let (out, next) = net.sequence(&x.narrow(0, t * B, B).unwrap(), &none_start, &st, B).unwrap();
            outs.extend(out.flatten_all().unwrap().to_vec1::<f32>().unwrap());
            host = net.state_to_host(&next).unwrap();
        }
        assert_eq!(outs, seq_out, "{what}: outputs");
        assert_eq!(host, net.state_to_host(&seq_fin).unwrap(), "{what}: final state");
    }
}

/// Back-propagation through time: the gradient of Σ w·outputs + Σ v·final state (candle's
/// autograd; the kernels' backward pass, without the final state's term) with respect to every
/// parameter, along random directions, against the f64 reference's central differences.
#[test]
fn gradients_through_time_match_finite_differences() {
    for (what, c, kernels) in both() {
        let (_, vars, loss, _) = run(&c, kernels, !kernels);
        let grads = loss.backward().unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(99);
        let params: Vec<Vec<f64>> = c.params.iter().map(|p| f64s(p)).collect();
        for trial in 0..3 {
            let dir: Vec<Vec<f64>> =
                params.iter().map(|p| p.iter().map(|_| rng.random_range(-1.0..1.0)).collect()).collect();
            let analytic: f64 = vars
                .iter()
                .zip(&dir)
                .map(|(v, d)| {
                    let g = grads.get(v.as_tensor()).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
                    g.iter().zip(d).map(|(g, d)| f64::from(*g) * d).sum::<f64>()
                })
                .sum();
            let h = 1e-5;
            let at = |s: f64| -> Vec<Vec<f64>> {
                params.iter().zip(&dir).map(|(p, d)| p.iter().zip(d).map(|(p, d)| p + s * d).collect()).collect()
            };
            let numeric = (loss_ref(&c, &at(h), !kernels) - loss_ref(&c, &at(-h), !kernels)) / (2.0 * h);
            assert!(
                (analytic - numeric).abs() <= 1e-4 * (1.0 + numeric.abs()),
                "{what} direction {trial}: ∇L·d = {analytic} vs finite differences {numeric}"
            );
        }
    }
}

/// The kernels equal candle's ops: the outputs, the final state, and the gradients of the loss
/// (without the final state's term) with respect to every parameter and to the input, to 1e-5
/// relative to the largest value, on sequences with episode starts inside them.
#[test]
fn the_kernels_equal_candle() {
    let close = |what: &str, a: &[f32], b: &[f32]| {
        let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-3);
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= 1e-5 * scale, "{what}[{i}]: kernels {x} vs candle {y} (scale {scale})");
        }
        assert_eq!(a.len(), b.len(), "{what}");
    };
    for (what, c) in cases() {
        let host = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let (net_k, x, starts, s0) = inputs(&c, true);
        let (net_c, ..) = inputs(&c, false);
        let (out_k, fin_k) = net_k.sequence(&x, &starts, &s0, B).unwrap();
        let (out_c, fin_c) = net_c.sequence(&x, &starts, &s0, B).unwrap();
        close(&format!("{what} outputs"), &host(&out_k), &host(&out_c));
        close(&format!("{what} state"), &net_k.state_to_host(&fin_k).unwrap(), &net_c.state_to_host(&fin_c).unwrap());
        let (_, vars_k, loss_k, x_k) = run(&c, true, false);
        let (_, vars_c, loss_c, x_c) = run(&c, false, false);
        let (grads_k, grads_c) = (loss_k.backward().unwrap(), loss_c.backward().unwrap());
        for (k, (vk, vc)) in vars_k.iter().zip(&vars_c).enumerate() {
            close(&format!("{what} ∂L/∂param {k}"), &host(grads_k.get(vk).unwrap()), &host(grads_c.get(vc).unwrap()));
        }
        close(&format!("{what} ∂L/∂x"), &host(grads_k.get(&x_k).unwrap()), &host(grads_c.get(&x_c).unwrap()));
    }
}

#[test]
fn parameter_names_and_shapes_are_pytorchs() {
    let s = RecurrentShape { cell: CellKind::Lstm, input: 4, hidden: 5, layers: 2 };
    let names: Vec<String> = s.param_shapes("lstm_actor").into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names[..4],
        ["lstm_actor.weight_ih_l0", "lstm_actor.weight_hh_l0", "lstm_actor.bias_ih_l0", "lstm_actor.bias_hh_l0"]
    );
    assert_eq!(s.param_shapes("x")[4].1, vec![20, 5], "layer 1 reads the hidden layer below");
    let g = RecurrentShape { cell: CellKind::Gru, ..s };
    assert_eq!((g.param_shapes("x")[0].1.clone(), g.state_dim(), s.state_dim()), (vec![15, 4], 10, 20));
    let e = Recurrent::new(s, vec![vec![0.0; 3]], &Device::Cpu).err().unwrap().to_string();
    assert!(e.contains("recurrent parameter arrays"), "{e}");
}

/// An episode start cuts the sequence: the loss's gradient with respect to the state before
/// step 0 is exactly 0 for the env whose episode starts at step 0, and not for the others.
#[test]
fn no_gradient_crosses_an_episode_start() {
    for (what, c) in cases() {
        let dev = Device::Cpu;
        let (net, _) = Recurrent::new(c.shape, c.params.clone(), &dev).unwrap();
        let sd = c.shape.state_dim();
        let s0 = candle_core::Var::from_tensor(&Tensor::from_slice(&c.state0, (B, sd), &dev).unwrap()).unwrap();
        let (h, per) = (c.shape.hidden, c.shape.cell.states());
        let layers = (0..c.shape.layers)
            .map(|k| (0..per).map(|s| s0.as_tensor().narrow(1, (k * per + s) * h, h).unwrap()).collect())
            .collect();
        let state0 = proxima::policy::recurrent::RecurrentState { layers };
        let x = Tensor::from_slice(&c.x, (T * B, c.shape.input), &dev).unwrap();
        let starts = Tensor::from_slice(&c.starts, T * B, &dev).unwrap();
        let (out, _) = net.sequence(&x, &starts, &state0, B).unwrap();
        let g = out.sum_all().unwrap().backward().unwrap();
        let g = g.get(s0.as_tensor()).unwrap().to_vec2::<f32>().unwrap();
        assert!(g[2].iter().all(|&v| v == 0.0), "{what}: env 2 starts at step 0, yet ∂L/∂h₀ = {:?}", g[2]);
        assert!(g[0].iter().any(|&v| v != 0.0) && g[1].iter().any(|&v| v != 0.0), "{what}: envs 0 and 1 carry h₀");
    }
}

mod policy {
    use candle_core::{Device, Tensor};
    use proxima::policy::fused::FusedMlp;
    use proxima::policy::recurrent::{CellKind, RecurrentSpec};
    use proxima::policy::{ActionKind, ActorCritic, Policy, PolicySpec};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const N: usize = 3;
    const T: usize = 7;
    const OD: usize = 4;

    fn spec(cell: CellKind, shared_lstm: bool, action: ActionKind) -> PolicySpec {
        let recurrent =
            RecurrentSpec { cell, hidden_size: 8, n_layers: 2, shared_lstm, enable_critic_lstm: !shared_lstm };
        PolicySpec { recurrent: Some(recurrent), ..PolicySpec::mlp(OD, action, vec![16, 16]) }
    }

    fn actions() -> [ActionKind; 2] {
        [ActionKind::Discrete { n: 3 }, ActionKind::Continuous { dim: 2, low: vec![-1.0; 2], high: vec![1.0; 2] }]
    }

    /// Acting step by step (the collector's view: hidden states carried, zeroed at episode
    /// starts) and evaluating the whole rollout as one sequence (the loss's view) give the same
    /// hidden states bit for bit, and the same values and log-probabilities of the actions taken
    /// to float rounding, so r_t(θ_old) = 1.
    #[test]
    fn acting_step_by_step_is_the_sequence_the_loss_evaluates() {
        for (cell, kernels) in
            [(CellKind::Lstm, false), (CellKind::Gru, false), (CellKind::Lstm, true), (CellKind::Gru, true)]
        {
            for shared in [false, true] {
                for action in actions() {
                    let what = format!("{cell:?} shared_lstm {shared} {action:?} kernels {kernels}");
                    let sp = spec(cell, shared, action);
                    let mut net =
                        ActorCritic::new(sp.clone(), &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
                    net.set_recurrent_kernels(kernels);
                    let sd = net.recurrent_state_dim();
                    assert_eq!(
                        sd,
                        if shared { 2 * 2 * 8 } else { 2 * 2 * 2 * 8 } / if cell == CellKind::Gru { 2 } else { 1 }
                    );
                    let mut rng = ChaCha8Rng::seed_from_u64(2);
                    let obs: Vec<f32> = (0..T * N * OD).map(|_| rng.random_range(-1.0..1.0)).collect();
                    let starts: Vec<bool> = (0..T * N).map(|i| i < N || rng.random_bool(0.15)).collect();
                    let state0 = vec![0f32; N * sd];
                    let (mut state, mut acts, mut lps, mut vals) = (state0.clone(), vec![], vec![], vec![]);
                    for t in 0..T {
                        let rows = t * N..(t + 1) * N;
                        let out = net
                            .act_recurrent(
                                &obs[rows.start * OD..rows.end * OD],
                                None,
                                &starts[rows],
                                &mut state,
                                false,
                                &mut rng,
                            )
                            .unwrap();
                        acts.extend(out.actions);
                        lps.extend(out.log_probs);
                        vals.extend(out.values);
                    }
                    let x = Tensor::from_slice(&obs, (T * N, OD), &Device::Cpu).unwrap();
                    let s: Vec<f32> = starts.iter().map(|&s| f32::from(u8::from(s))).collect();
                    let s = Tensor::from_vec(s, T * N, &Device::Cpu).unwrap();
                    let (head, values, fin) = net.forward_sequence(&x, &s, &state0, N).unwrap();
                    // The recurrent steps are the same products either way (N rows each): the
                    // same bits; the MLPs' products over T·N rows round differently from N rows.
                    assert_eq!(fin, state, "{what}: final hidden state");
                    let close = |x: f32, y: f32| (x - y).abs() <= 1e-6 * (1.0 + y.abs());
                    let v = values.to_vec1::<f32>().unwrap();
                    assert!(v.iter().zip(&vals).all(|(x, y)| close(*x, *y)), "{what}: V(s) {v:?} vs {vals:?}");
                    let ad = sp.action.act_dim();
                    let a = Tensor::from_slice(&acts, (T * N, ad), &Device::Cpu).unwrap();
                    let log_std = net.log_std().map(|v| v.as_tensor().clone());
                    let (lp, _) = sp.action.log_prob_entropy(&head, log_std.as_ref(), &a).unwrap();
                    let lp = lp.to_vec1::<f32>().unwrap();
                    for (i, (x, y)) in lp.iter().zip(&lps).enumerate() {
                        assert!((x - y).abs() <= 1e-6 * (1.0 + y.abs()), "{what}: log π of step {i}: {x} vs {y}");
                    }
                }
            }
        }
    }

    /// The rollout KL over the rollout's sequences: 0 for the policy that acted (its pass from
    /// the rollout's start states, zeroed at the episode starts, is the acting one), and positive
    /// once θ moves.
    #[test]
    fn the_rollout_kl_over_sequences_is_zero_for_the_acting_policy() {
        for kernels in [false, true] {
            let sp = spec(CellKind::Lstm, false, ActionKind::Discrete { n: 3 });
            let mut net = ActorCritic::new(sp, &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(5)).unwrap();
            net.set_recurrent_kernels(kernels);
            let mut rng = ChaCha8Rng::seed_from_u64(6);
            let obs: Vec<f32> = (0..T * N * OD).map(|_| rng.random_range(-1.0..1.0)).collect();
            let starts: Vec<bool> = (0..T * N).map(|i| i < N || rng.random_bool(0.2)).collect();
            let state0: Vec<f32> = (0..N * net.recurrent_state_dim()).map(|_| rng.random_range(-0.5..0.5)).collect();
            let (mut state, mut heads) = (state0.clone(), Vec::new());
            for t in 0..T {
                let rows = t * N..(t + 1) * N;
                let out = net
                    .act_recurrent(
                        &obs[rows.start * OD..rows.end * OD],
                        None,
                        &starts[rows],
                        &mut state,
                        false,
                        &mut rng,
                    )
                    .unwrap();
                heads.extend(out.head);
            }
            let kl = |net: &ActorCritic| {
                Policy::rollout_kl_recurrent(net, &obs, (&starts, &state0), &heads, &[], None).unwrap()
            };
            assert!(kl(&net).abs() < 1e-6, "the acting policy's KL {}", kl(&net));
            let moved: Vec<Vec<f32>> = net
                .params()
                .unwrap()
                .into_iter()
                .map(|p| p.iter().enumerate().map(|(i, v)| v + 0.3 * (i as f32 * 1.3).sin()).collect())
                .collect();
            net.set_params(&moved).unwrap();
            assert!(kl(&net) > 1e-4, "KL after θ moved: {}", kl(&net));
        }
    }

    /// `shared_lstm`: the critic reads the actor's LSTM outputs without their gradient, so a
    /// value-only loss moves no LSTM parameter; with its own LSTM the critic's loss moves that one.
    #[test]
    fn the_critic_loss_reaches_the_actor_lstm_only_through_its_own() {
        for (shared, kernels) in [(true, false), (false, false), (true, true), (false, true)] {
            let mut net = ActorCritic::new(
                spec(CellKind::Lstm, shared, ActionKind::Discrete { n: 3 }),
                &Device::Cpu,
                &mut ChaCha8Rng::seed_from_u64(3),
            )
            .unwrap();
            net.set_recurrent_kernels(kernels);
            let x = Tensor::ones((2 * N, OD), candle_core::DType::F32, &Device::Cpu).unwrap();
            let s = Tensor::zeros(2 * N, candle_core::DType::F32, &Device::Cpu).unwrap();
            let (_, values, _) = net.forward_sequence(&x, &s, &vec![0.1; N * net.recurrent_state_dim()], N).unwrap();
            let grads = values.sum_all().unwrap().backward().unwrap();
            for (name, var) in net.named_params() {
                let g =
                    grads.get(var.as_tensor()).map(|g| g.abs().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap());
                let g = g.unwrap_or(0.0);
                if name.starts_with("lstm_actor") {
                    assert_eq!(g, 0.0, "shared {shared}: {name} moved by the value loss");
                } else if name.starts_with("lstm_critic") {
                    assert!(g > 0.0, "{name}: no gradient from the value loss");
                }
            }
            assert_eq!(net.named_params().iter().any(|(n, _)| n.starts_with("lstm_critic")), !shared);
        }
    }

    /// Bad recurrent settings are errors: both critic options, neither, a zero size, the
    /// fused backend, and a feed-forward pass of a recurrent policy.
    #[test]
    fn bad_recurrent_specs_and_calls_are_errors() {
        let bad = |r: RecurrentSpec| {
            let sp = PolicySpec { recurrent: Some(r), ..PolicySpec::mlp(OD, ActionKind::Discrete { n: 2 }, vec![8]) };
            ActorCritic::new(sp, &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(0)).err().unwrap().to_string()
        };
        let ok = RecurrentSpec {
            cell: CellKind::Lstm,
            hidden_size: 4,
            n_layers: 1,
            shared_lstm: false,
            enable_critic_lstm: true,
        };
        assert!(
            bad(RecurrentSpec { shared_lstm: true, ..ok }).contains("either shares the actor's LSTM or has its own")
        );
        assert!(bad(RecurrentSpec { enable_critic_lstm: false, ..ok }).contains("not supported yet"));
        assert!(bad(RecurrentSpec { hidden_size: 0, ..ok }).contains("must be positive"));
        let sp = spec(CellKind::Gru, false, ActionKind::Discrete { n: 2 });
        let e = FusedMlp::new(sp.clone(), &mut ChaCha8Rng::seed_from_u64(0)).err().unwrap().to_string();
        assert!(e.contains("candle backend"), "{e}");
        let net = ActorCritic::new(sp, &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(0)).unwrap();
        let e = Policy::act(&net, &[0.0; OD], false, &mut ChaCha8Rng::seed_from_u64(0)).unwrap_err().to_string();
        assert!(e.contains("hidden state"), "{e}");
        let e = net.act_recurrent(&[0.0; OD], None, &[true], &mut [0.0; 3], false, &mut ChaCha8Rng::seed_from_u64(0));
        assert!(e.unwrap_err().to_string().contains("hidden state of 3 values"));
    }
}
