//! One recurrent layer (LSTM or GRU, PyTorch's `nn.LSTM` / `nn.GRU` parameterisation) over a
//! whole sequence of T steps of B envs, forward and backward through time, on the matrix products
//! of [`crate::gemm`]: the input's gates for all T·B rows in one product, then per step one product
//! of the B hidden states with `W_hhᵀ` and the gates' element-wise arithmetic; backward, per step
//! the gates' gradients and one product with `W_hh`, then the weights' and the input's gradients
//! over all T·B rows in one product each. Recurrent PPO's training and acting (T = 1) share it.
//!
//! The hidden state of env e is zeroed before step t where `keep[t·B + e]` is 0 (an episode
//! starts: sb3-contrib's `_process_sequence` multiplies it by 1 − episode_start), so no gradient
//! crosses an episode start.
//!
//! LSTM (gates i, f, g, o):
//!   [i f g o] = W_ih·x + b_ih + W_hh·h + b_hh;  c' = σ(f)·c + σ(i)·tanh(g);  h' = σ(o)·tanh(c').
//! GRU (gates r, z, n):
//!   r = σ(W_ir·x + b_ir + W_hr·h + b_hr);  z = σ(W_iz·x + b_iz + W_hz·h + b_hz);
//!   n = tanh(W_in·x + b_in + r·(W_hn·h + b_hn));  h' = (1 − z)·n + z·h.
//!
//! The parameters are one flat slice, PyTorch's tensors back to back: `weight_ih [G·H, in]`,
//! `weight_hh [G·H, H]`, `bias_ih [G·H]`, `bias_hh [G·H]` (G = 4 gates for an LSTM, 3 for a GRU),
//! row-major. Every sum is a fixed-order chain, so a result is the same bits on every machine;
//! σ and tanh are [`crate::math::exp_f32`]'s and [`crate::dense::tanh_fma`]'s.
//!
//! Source: the equations of PyTorch's `nn.LSTM` and `nn.GRU` documentation; back-propagation
//! through time as in Werbos, "Backpropagation Through Time: What It Does and How to Do It"
//! (Proc. IEEE 78(10), 1990).

use crate::dense::tanh_fma;
use crate::gemm::{chain_gemm, Rows, Start};
use crate::math::exp_f32;
use crate::transpose::transpose;
use crate::View;

/// The recurrent cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    /// Long short-term memory: 4 gates, state (h, c).
    Lstm,
    /// Gated recurrent unit: 3 gates, state h.
    Gru,
}

impl Cell {
    /// Gates per hidden unit (G).
    pub fn gates(self) -> usize {
        match self {
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }
}

/// One layer over one sequence batch: cell, input width, hidden width, steps T, envs B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layer {
    /// LSTM or GRU.
    pub cell: Cell,
    /// Input features per step.
    pub input: usize,
    /// Hidden units H.
    pub hidden: usize,
    /// Steps T.
    pub steps: usize,
    /// Envs B (the rows of one step).
    pub envs: usize,
}

impl Layer {
    /// Elements of the flat parameter slice: G·H·(in + H) + 2·G·H.
    pub fn n_params(&self) -> usize {
        let gh = self.cell.gates() * self.hidden;
        gh * (self.input + self.hidden) + 2 * gh
    }

    /// T·B, the rows of the input and of the output.
    pub fn rows(&self) -> usize {
        self.steps * self.envs
    }

    fn gh(&self) -> usize {
        self.cell.gates() * self.hidden
    }

    /// The four parameter tensors: (w_ih, w_hh, b_ih, b_hh).
    fn split<'a>(&self, p: &'a [f32]) -> (&'a [f32], &'a [f32], &'a [f32], &'a [f32]) {
        let gh = self.gh();
        let (w_ih, rest) = p.split_at(gh * self.input);
        let (w_hh, rest) = rest.split_at(gh * self.hidden);
        let (b_ih, b_hh) = rest.split_at(gh);
        (w_ih, w_hh, b_ih, &b_hh[..gh])
    }

    fn check(&self, params: &[f32], x: &[f32], keep: &[f32]) {
        assert_eq!(params.len(), self.n_params(), "recurrent: parameter count");
        assert_eq!(x.len(), self.rows() * self.input, "recurrent: input size");
        assert_eq!(keep.len(), self.rows(), "recurrent: episode-start size");
    }
}

/// What the forward pass keeps for the backward one (reused between calls: no allocation once
/// the sizes stop changing).
#[derive(Clone, Debug, Default)]
pub struct Tape {
    /// The gates after their nonlinearity, `[T·B, G·H]` (LSTM: σ(i) σ(f) tanh(g) σ(o); GRU: r z n).
    act: Vec<f32>,
    /// The hidden state each step read (zeroed at episode starts), `[T·B, H]`.
    h_in: Vec<f32>,
    /// LSTM: the cell state each step read (zeroed at episode starts), `[T·B, H]`.
    c_in: Vec<f32>,
    /// LSTM: tanh(c') of each step; GRU: W_hn·h + b_hn of each step, `[T·B, H]`.
    aux: Vec<f32>,
    /// W_hhᵀ `[H, G·H]` (the forward product's operand).
    w_hh_t: Vec<f32>,
    /// W_ihᵀ `[in, G·H]`.
    w_ih_t: Vec<f32>,
}

/// σ(x) = 1 / (1 + e^(−x)).
#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp_f32(-x))
}

/// The layer's forward pass: `out [T·B, H]` (each step's h'), time-major (row t·B + e), from
/// `x [T·B, in]`, `keep [T·B]` (0 where the step starts an episode) and the state before step 0,
/// `h [B, H]` and, for an LSTM, `c [B, H]`, which are advanced to the state after step T − 1.
/// `tape` records what [`backward`] needs.
///
/// # Panics
/// When a slice's length does not match `layer` (a caller's bug: every size is fixed by the spec).
pub fn forward(
    layer: &Layer,
    params: &[f32],
    x: &[f32],
    keep: &[f32],
    state: (&mut [f32], &mut [f32]),
    out: &mut [f32],
    tape: &mut Tape,
) {
    layer.check(params, x, keep);
    let (rows, h_dim, gh, b) = (layer.rows(), layer.hidden, layer.gh(), layer.envs);
    let (h, c) = state;
    assert!(h.len() == b * h_dim && out.len() == rows * h_dim, "recurrent: state or output size");
    let (w_ih, w_hh, b_ih, b_hh) = layer.split(params);
    resize(&mut tape.w_ih_t, layer.input * gh);
    resize(&mut tape.w_hh_t, h_dim * gh);
    transpose(&mut tape.w_ih_t, w_ih, (layer.input, gh));
    transpose(&mut tape.w_hh_t, w_hh, (h_dim, gh));
    resize(&mut tape.act, rows * gh);
    resize(&mut tape.h_in, rows * h_dim);
    resize(&mut tape.aux, rows * h_dim);
    match layer.cell {
        Cell::Lstm => {
            assert_eq!(c.len(), b * h_dim, "recurrent: LSTM cell-state size");
            resize(&mut tape.c_in, rows * h_dim);
            // All steps' input products at once, each chain starting at b_ih + b_hh; the step
            // adds its h·W_hhᵀ to the same chains.
            let bias: Vec<f32> = b_ih.iter().zip(b_hh).map(|(a, b)| a + b).collect();
            let w = Rows { data: &tape.w_ih_t, ld: gh };
            chain_gemm(&mut tape.act, (rows, gh, layer.input), View::rows(x, layer.input), w, Start::Row(&bias));
            for t in 0..layer.steps {
                lstm_step(layer, t, keep, (h, c), out, tape);
            }
        }
        Cell::Gru => {
            let w = Rows { data: &tape.w_ih_t, ld: gh };
            chain_gemm(&mut tape.act, (rows, gh, layer.input), View::rows(x, layer.input), w, Start::Row(b_ih));
            let mut gh_buf = vec![0f32; b * gh];
            for t in 0..layer.steps {
                gru_step(layer, t, keep, h, b_hh, &mut gh_buf, out, tape);
            }
        }
    }
}

/// Step t of an LSTM: the gates' pre-activations in `tape.act`'s rows of step t get h·W_hhᵀ,
/// then their nonlinearities; (h, c) advance; h' goes to `out`.
fn lstm_step(
    layer: &Layer,
    t: usize,
    keep: &[f32],
    (h, c): (&mut [f32], &mut [f32]),
    out: &mut [f32],
    tape: &mut Tape,
) {
    let (b, hd) = (layer.envs, layer.hidden);
    let gh = 4 * hd;
    let r0 = t * b;
    for e in 0..b {
        let k = keep[r0 + e];
        for j in 0..hd {
            tape.h_in[(r0 + e) * hd + j] = h[e * hd + j] * k;
            tape.c_in[(r0 + e) * hd + j] = c[e * hd + j] * k;
        }
    }
    let h_in = &tape.h_in[r0 * hd..(r0 + b) * hd];
    let gates = &mut tape.act[r0 * gh..(r0 + b) * gh];
    chain_gemm(gates, (b, gh, hd), View::rows(h_in, hd), Rows { data: &tape.w_hh_t, ld: gh }, Start::Dst);
    for e in 0..b {
        let g = &mut tape.act[(r0 + e) * gh..(r0 + e + 1) * gh];
        for j in 0..hd {
            let (i, f) = (sigmoid(g[j]), sigmoid(g[hd + j]));
            let (gg, o) = (tanh_fma(g[2 * hd + j]), sigmoid(g[3 * hd + j]));
            (g[j], g[hd + j], g[2 * hd + j], g[3 * hd + j]) = (i, f, gg, o);
            let c_new = f.mul_add(tape.c_in[(r0 + e) * hd + j], i * gg);
            let tc = tanh_fma(c_new);
            tape.aux[(r0 + e) * hd + j] = tc;
            c[e * hd + j] = c_new;
            h[e * hd + j] = o * tc;
            out[(r0 + e) * hd + j] = o * tc;
        }
    }
}

/// Step t of a GRU: W_hh·h + b_hh into `gh_buf`, then the gates; h advances; h' goes to `out`.
#[allow(clippy::too_many_arguments)]
fn gru_step(
    layer: &Layer,
    t: usize,
    keep: &[f32],
    h: &mut [f32],
    b_hh: &[f32],
    gh_buf: &mut [f32],
    out: &mut [f32],
    tape: &mut Tape,
) {
    let (b, hd) = (layer.envs, layer.hidden);
    let gh = 3 * hd;
    let r0 = t * b;
    for e in 0..b {
        let k = keep[r0 + e];
        for j in 0..hd {
            tape.h_in[(r0 + e) * hd + j] = h[e * hd + j] * k;
        }
    }
    let h_in = &tape.h_in[r0 * hd..(r0 + b) * hd];
    chain_gemm(gh_buf, (b, gh, hd), View::rows(h_in, hd), Rows { data: &tape.w_hh_t, ld: gh }, Start::Row(b_hh));
    for e in 0..b {
        let g = &mut tape.act[(r0 + e) * gh..(r0 + e + 1) * gh];
        let gh_e = &gh_buf[e * gh..(e + 1) * gh];
        for j in 0..hd {
            let r = sigmoid(g[j] + gh_e[j]);
            let z = sigmoid(g[hd + j] + gh_e[hd + j]);
            let n = tanh_fma(r.mul_add(gh_e[2 * hd + j], g[2 * hd + j]));
            (g[j], g[hd + j], g[2 * hd + j]) = (r, z, n);
            tape.aux[(r0 + e) * hd + j] = gh_e[2 * hd + j];
            let h_old = tape.h_in[(r0 + e) * hd + j];
            let h_new = z.mul_add(h_old - n, n);
            h[e * hd + j] = h_new;
            out[(r0 + e) * hd + j] = h_new;
        }
    }
}

/// The layer's backward pass through time: from `d_out [T·B, H]` (∂L/∂h' of each step; the
/// state after the last step gets no gradient), writes `dx [T·B, in]` and `dparams` (the flat
/// layout of the parameters). `x`, `keep` and `params` are the forward pass's, `tape` its record.
///
/// # Panics
/// As [`forward`], and when `tape` is not from a forward pass of this layer.
#[allow(clippy::too_many_arguments)] // the forward pass's inputs, its tape, and the gradients in and out
pub fn backward(
    layer: &Layer,
    params: &[f32],
    x: &[f32],
    keep: &[f32],
    tape: &Tape,
    d_out: &[f32],
    dx: &mut [f32],
    dparams: &mut [f32],
) {
    layer.check(params, x, keep);
    let (rows, hd, gh, b) = (layer.rows(), layer.hidden, layer.gh(), layer.envs);
    assert!(
        d_out.len() == rows * hd && dx.len() == rows * layer.input && dparams.len() == params.len(),
        "recurrent: gradient sizes"
    );
    assert!(tape.act.len() == rows * gh && tape.h_in.len() == rows * hd, "recurrent: the tape is not this layer's");
    let (w_ih, w_hh, _, _) = layer.split(params);
    // ∂L/∂(pre-activation gates) of the input product and of the hidden product (equal for an LSTM).
    let mut d_gx = vec![0f32; rows * gh];
    let mut d_gh = match layer.cell {
        Cell::Lstm => Vec::new(),
        Cell::Gru => vec![0f32; rows * gh],
    };
    let (mut dh, mut dc, mut dh_in) = (vec![0f32; b * hd], vec![0f32; b * hd], vec![0f32; b * hd]);
    for t in (0..layer.steps).rev() {
        let r0 = t * b;
        let hh = match layer.cell {
            Cell::Lstm => {
                lstm_gate_grads(layer, t, tape, d_out, &mut dh, &mut dc, &mut d_gx, keep);
                dh_in.fill(0.0);
                &d_gx[r0 * gh..(r0 + b) * gh]
            }
            Cell::Gru => {
                gru_gate_grads(layer, t, tape, d_out, &dh, &mut dh_in, (&mut d_gx, &mut d_gh));
                &d_gh[r0 * gh..(r0 + b) * gh]
            }
        };
        // ∂L/∂h_in = (direct part) + ∂L/∂gates_h · W_hh; the state before the step gets it where kept.
        chain_gemm(&mut dh_in, (b, hd, gh), View::rows(hh, gh), Rows { data: w_hh, ld: hd }, Start::Dst);
        for e in 0..b {
            let k = keep[r0 + e];
            for j in 0..hd {
                dh[e * hd + j] = dh_in[e * hd + j] * k;
            }
        }
    }
    let d_hh = if layer.cell == Cell::Lstm { &d_gx } else { &d_gh };
    weight_grads(layer, x, &tape.h_in, (&d_gx, d_hh), dparams);
    chain_gemm(dx, (rows, layer.input, gh), View::rows(&d_gx, gh), Rows { data: w_ih, ld: layer.input }, Start::Zero);
}

/// LSTM step t backward: ∂L/∂h' = d_out + `dh` (from step t + 1), ∂L/∂c' = `dc`; writes the
/// gates' pre-activation gradients of step t into `d_gates` and leaves in `dc` ∂L/∂c of the state
/// the step read (masked where an episode started).
#[allow(clippy::too_many_arguments)]
fn lstm_gate_grads(
    layer: &Layer,
    t: usize,
    tape: &Tape,
    d_out: &[f32],
    dh: &mut [f32],
    dc: &mut [f32],
    d_gates: &mut [f32],
    keep: &[f32],
) {
    let (b, hd) = (layer.envs, layer.hidden);
    let gh = 4 * hd;
    for e in 0..b {
        let r = t * b + e;
        let a = &tape.act[r * gh..(r + 1) * gh];
        let d = &mut d_gates[r * gh..(r + 1) * gh];
        for j in 0..hd {
            let (i, f, g, o) = (a[j], a[hd + j], a[2 * hd + j], a[3 * hd + j]);
            let tc = tape.aux[r * hd + j];
            let dh_t = d_out[r * hd + j] + dh[e * hd + j];
            let dc_t = dc[e * hd + j] + dh_t * o * (1.0 - tc * tc);
            d[j] = dc_t * g * i * (1.0 - i);
            d[hd + j] = dc_t * tape.c_in[r * hd + j] * f * (1.0 - f);
            d[2 * hd + j] = dc_t * i * (1.0 - g * g);
            d[3 * hd + j] = dh_t * tc * o * (1.0 - o);
            dc[e * hd + j] = dc_t * f * keep[r];
        }
    }
}

/// GRU step t backward: ∂L/∂h' = d_out + `dh`; writes the pre-activation gradients of the input
/// gates (`d_gx`) and the hidden ones (`d_gh`: the n gate's through r) of step t, and into
/// `dh_in` the direct part of ∂L/∂h_in (z·∂L/∂h').
fn gru_gate_grads(
    layer: &Layer,
    t: usize,
    tape: &Tape,
    d_out: &[f32],
    dh: &[f32],
    dh_in: &mut [f32],
    (d_gx, d_gh): (&mut [f32], &mut [f32]),
) {
    let (b, hd) = (layer.envs, layer.hidden);
    let gh = 3 * hd;
    for e in 0..b {
        let row = t * b + e;
        let a = &tape.act[row * gh..(row + 1) * gh];
        for j in 0..hd {
            let (r, z, n) = (a[j], a[hd + j], a[2 * hd + j]);
            let h_old = tape.h_in[row * hd + j];
            let dh_t = d_out[row * hd + j] + dh[e * hd + j];
            let dn = dh_t * (1.0 - z) * (1.0 - n * n);
            let dz = dh_t * (h_old - n) * z * (1.0 - z);
            let dr = dn * tape.aux[row * hd + j] * r * (1.0 - r);
            (d_gx[row * gh + j], d_gx[row * gh + hd + j], d_gx[row * gh + 2 * hd + j]) = (dr, dz, dn);
            (d_gh[row * gh + j], d_gh[row * gh + hd + j], d_gh[row * gh + 2 * hd + j]) = (dr, dz, dn * r);
            dh_in[e * hd + j] = dh_t * z;
        }
    }
}

/// ∂L/∂W_ih = d_gxᵀ·X, ∂L/∂W_hh = d_ghᵀ·H_in, ∂L/∂b_ih and ∂L/∂b_hh their column sums (in row
/// order), into the flat gradient.
fn weight_grads(layer: &Layer, x: &[f32], h_in: &[f32], (d_gx, d_gh): (&[f32], &[f32]), dparams: &mut [f32]) {
    let (rows, hd, gh, inp) = (layer.rows(), layer.hidden, layer.gh(), layer.input);
    let (dw_ih, rest) = dparams.split_at_mut(gh * inp);
    let (dw_hh, rest) = rest.split_at_mut(gh * hd);
    let (db_ih, db_hh) = rest.split_at_mut(gh);
    let (gx_t, gh_t) = (View { data: d_gx, rs: 1, cs: gh }, View { data: d_gh, rs: 1, cs: gh });
    chain_gemm(dw_ih, (gh, inp, rows), gx_t, Rows { data: x, ld: inp }, Start::Zero);
    chain_gemm(dw_hh, (gh, hd, rows), gh_t, Rows { data: h_in, ld: hd }, Start::Zero);
    column_sums(db_ih, d_gx, gh);
    column_sums(db_hh, d_gh, gh);
}

/// `sums[j] = Σ_r m[r, j]`, rows in order.
fn column_sums(sums: &mut [f32], m: &[f32], cols: usize) {
    sums.fill(0.0);
    for row in m.chunks_exact(cols) {
        for (s, v) in sums.iter_mut().zip(row) {
            *s += v;
        }
    }
}

fn resize(v: &mut Vec<f32>, n: usize) {
    v.clear();
    v.resize(n, 0.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) - 0.5
            })
            .collect()
    }

    /// Σ out·w of a forward pass with initial state zero (a scalar loss).
    fn loss(layer: &Layer, p: &[f32], x: &[f32], keep: &[f32], w: &[f32]) -> f64 {
        let (mut h, mut c) = (vec![0.1f32; layer.envs * layer.hidden], vec![-0.2f32; layer.envs * layer.hidden]);
        let mut out = vec![0f32; layer.rows() * layer.hidden];
        forward(layer, p, x, keep, (&mut h, &mut c), &mut out, &mut Tape::default());
        out.iter().zip(w).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum()
    }

    /// Every gradient against central differences, with an episode start inside the sequence.
    fn check_gradients(cell: Cell) {
        let layer = Layer { cell, input: 3, hidden: 5, steps: 4, envs: 2 };
        let p: Vec<f32> = data(layer.n_params(), 1).iter().map(|v| v * 1.2).collect();
        let x = data(layer.rows() * 3, 2);
        let keep = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0];
        let w = data(layer.rows() * 5, 3);
        let (mut h, mut c) = (vec![0.1f32; 10], vec![-0.2f32; 10]);
        let (mut out, mut tape) = (vec![0f32; 40], Tape::default());
        forward(&layer, &p, &x, &keep, (&mut h, &mut c), &mut out, &mut tape);
        let (mut dx, mut dp) = (vec![0f32; x.len()], vec![0f32; p.len()]);
        backward(&layer, &p, &x, &keep, &tape, &w, &mut dx, &mut dp);
        let eps = 1e-2f32;
        let fd = |v: &mut Vec<f32>, i: usize, which: bool| {
            let old = v[i];
            v[i] = old + eps;
            let up = if which { loss(&layer, v, &x, &keep, &w) } else { loss(&layer, &p, v, &keep, &w) };
            v[i] = old - eps;
            let down = if which { loss(&layer, v, &x, &keep, &w) } else { loss(&layer, &p, v, &keep, &w) };
            v[i] = old;
            (up - down) / (2.0 * f64::from(eps))
        };
        let mut pp = p.clone();
        for (i, g) in dp.iter().enumerate() {
            let n = fd(&mut pp, i, true);
            assert!((n - f64::from(*g)).abs() < 2e-3 * (1.0 + n.abs()), "{cell:?} param {i}: fd {n} vs {g}");
        }
        let mut xx = x.clone();
        for (i, g) in dx.iter().enumerate() {
            let n = fd(&mut xx, i, false);
            assert!((n - f64::from(*g)).abs() < 2e-3 * (1.0 + n.abs()), "{cell:?} input {i}: fd {n} vs {g}");
        }
    }

    #[test]
    fn lstm_gradients_equal_finite_differences() {
        check_gradients(Cell::Lstm);
    }

    #[test]
    fn gru_gradients_equal_finite_differences() {
        check_gradients(Cell::Gru);
    }

    #[test]
    fn a_sequence_equals_its_steps_one_at_a_time() {
        for cell in [Cell::Lstm, Cell::Gru] {
            let layer = Layer { cell, input: 4, hidden: 7, steps: 5, envs: 3 };
            let p = data(layer.n_params(), 4);
            let x = data(layer.rows() * 4, 5);
            let keep: Vec<f32> = (0..15).map(|r| if r == 7 { 0.0 } else { 1.0 }).collect();
            let (mut h, mut c) = (data(21, 6), data(21, 7));
            let (h0, c0) = (h.clone(), c.clone());
            let mut out = vec![0f32; 15 * 7];
            forward(&layer, &p, &x, &keep, (&mut h, &mut c), &mut out, &mut Tape::default());
            let one = Layer { steps: 1, ..layer };
            let (mut h1, mut c1, mut o1) = (h0, c0, vec![0f32; 21]);
            for t in 0..5 {
                forward(
                    &one,
                    &p,
                    &x[t * 12..(t + 1) * 12],
                    &keep[t * 3..(t + 1) * 3],
                    (&mut h1, &mut c1),
                    &mut o1,
                    &mut Tape::default(),
                );
                assert_eq!(o1, out[t * 21..(t + 1) * 21], "{cell:?} step {t}");
            }
            assert_eq!(h1, h);
            if cell == Cell::Lstm {
                assert_eq!(c1, c);
            }
        }
    }
}
