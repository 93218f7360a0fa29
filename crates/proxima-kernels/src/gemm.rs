//! The fused MLP's matrix products, written for its small shapes (a few hundred rows, widths of
//! tens to hundreds): `C[m, n] = C₀ + A[m, k]·B[k, n]`, where every element of C is **one chain
//! of fused multiply-adds over p = 0, 1, …, k−1 in order**, `c ← fma(a_ip, b_pj, c)`, starting
//! from C₀ (zero, or the values already in C).
//!
//! That order is the definition, not an implementation detail: the AVX-512, AVX2 + FMA and
//! portable kernels below compute the very same chains, so the result is the same bits on every
//! machine (the portable kernel's `f32::mul_add` is the correctly rounded fused operation, an
//! instruction or libm's `fmaf`) and does not depend on the tile shape or on m: a row's product is
//! the same in a batch of 4 as in a batch of 512, so the rollout's forward pass and the update's
//! agree exactly.
//!
//! The kernels keep an `MR × NV` tile of C in vector registers (AVX-512: up to 6 rows × 4
//! vectors of 16 columns, 24 of the 32 registers; AVX2: 6 × 2 vectors of 8), load B's row p as
//! NV vectors, broadcast A's element (i, p) for each tile row and add the products; the last
//! vector of a row is masked when n is not a multiple of the vector width. B's rows are read as
//! vectors, so B is row-major (row stride `ldb ≥ n`); A may be any strided view (its elements are
//! broadcast one by one). The kernel is chosen at run time by CPU feature (`std`'s cached
//! detection), so one binary runs on any x86-64 or aarch64 machine.
//!
//! Long chains run in blocks of steps (a column panel's first block for every row block, then its
//! next block): each block starts from where the block before stored the chain in C, so the
//! chains, and their bits, are the unblocked ones, while B's rows of one block stay in L1.
//!
//! Source: the register-tiled "outer product" micro-kernel of Goto & van de Geijn, "Anatomy of
//! High-Performance Matrix Multiplication" (ACM TOMS 34(3), 2008), with its blocking of k but
//! without the packing, which does not pay at these sizes (every operand fits in L1/L2).
//!
//! Why our own and not the `gemm` crate (which candle uses and the fused backend used before):
//! at these sizes its per-call cost (packing, dispatch) was a good part of the time; its AVX-512
//! kernels need a crate feature that would change candle's results too; and its bits depend on
//! the machine.

use crate::View;

/// Where each chain starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Start<'a> {
    /// At +0 (`C = A·B`).
    Zero,
    /// At C's current values (`C += A·B`, each element's old value first in its chain).
    Dst,
    /// Column j's chains at `row[j]` (`C = 1·rowᵀ + A·B`: a dense layer's bias); `row` holds at
    /// least n values.
    Row(&'a [f32]),
}

/// A row-major matrix operand read as rows of vectors: `data[p·ld + j]` is element (p, j).
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Row stride, in elements (at least the number of columns read).
    pub ld: usize,
}

impl Rows<'_> {
    /// Whether it holds the `k` rows of `n` columns a product reads.
    fn holds(&self, k: usize, n: usize) -> bool {
        self.ld >= n && (k == 0 || n == 0 || self.data.len() >= (k - 1) * self.ld + n)
    }
}

/// A matrix whose rows lie where a table says: row r is `data[base + offsets[r]..]`, its elements
/// contiguous (a convolution's windows, read where they lie in its input, without copying them
/// into a window matrix first).
#[derive(Clone, Copy, Debug)]
pub struct Table<'a> {
    /// What the rows are read from.
    pub data: &'a [f32],
    /// Each row's start, relative to `base`.
    pub offsets: &'a [u32],
    /// Added to every offset (where, inside each row's run, the columns read begin).
    pub base: usize,
}

impl Table<'_> {
    /// One past the largest index `rows` rows of `cols` elements read (0 when they read nothing).
    fn extent(&self, rows: usize, cols: usize) -> usize {
        let last = self.offsets[..rows].iter().max();
        last.filter(|_| cols > 0).map_or(0, |&o| self.base + o as usize + cols)
    }
}

/// How a product reads its operands (the tile kernels' `MODE`).
const PLAIN: u8 = 0;
/// A's rows from a [`Table`].
const TABLE_A: u8 = 1;
/// B's rows from a [`Table`].
const TABLE_B: u8 = 2;

/// The kernel tiers, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// 16-lane vectors (x86-64 with AVX-512F).
    Avx512,
    /// 8-lane vectors (x86-64 with AVX2 and FMA).
    Avx2,
    /// Scalar `mul_add` loops the compiler may vectorise (any machine).
    Portable,
}

/// The best tier this CPU runs.
pub fn best_tier() -> Tier {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Tier::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            return Tier::Avx2;
        }
    }
    Tier::Portable
}

/// Whether this CPU runs `tier`.
pub fn supported(tier: Tier) -> bool {
    match tier {
        Tier::Portable => true,
        #[cfg(target_arch = "x86_64")]
        Tier::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
        #[cfg(target_arch = "x86_64")]
        Tier::Avx2 => std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"),
        #[cfg(not(target_arch = "x86_64"))]
        _ => false,
    }
}

/// `dst[m, n]` (row-major, contiguous) = C₀ + `a[m, k]·b[k, n]`, each element one FMA chain over
/// p in order (module docs), on the best tier this CPU runs.
///
/// # Panics
/// When an operand is shorter than its shape needs (a bug in the caller: every size here is fixed
/// by the network's spec).
pub fn chain_gemm(dst: &mut [f32], (m, n, k): (usize, usize, usize), a: View<'_>, b: Rows<'_>, start: Start<'_>) {
    chain_gemm_on(best_tier(), dst, (m, n, k), a, b, start);
}

/// [`chain_gemm`] on a given tier (the tests compare the tiers).
///
/// # Panics
/// As [`chain_gemm`], and for a tier this CPU does not run.
pub fn chain_gemm_on(
    tier: Tier,
    dst: &mut [f32],
    (m, n, k): (usize, usize, usize),
    a: View<'_>,
    b: Rows<'_>,
    start: Start<'_>,
) {
    assert!(a.data.len() >= a.extent(m, k), "chain_gemm: A too short");
    assert!(b.holds(k, n), "chain_gemm: B too short");
    let ops = Operands::plain(a, b);
    run(tier, (dst, n), (m, n, k), ops, start);
}

/// [`chain_gemm`] with A's rows from a table, `A[i, p] = a.data[a.base + a.offsets[i] + p]`, into
/// `dst` of row stride `ldc` (≥ n): C's elements are the chains [`chain_gemm`] computes from the
/// same elements (so a convolution's windows multiply where they lie, with the bits of the window
/// matrix's product).
///
/// # Panics
/// As [`chain_gemm`], and when the table has fewer than m offsets or `ldc < n`.
pub fn chain_gemm_table_a(
    (dst, ldc): (&mut [f32], usize),
    (m, n, k): (usize, usize, usize),
    a: Table<'_>,
    b: Rows<'_>,
    start: Start<'_>,
) {
    table_a_on(best_tier(), (dst, ldc), (m, n, k), a, b, start);
}

/// [`chain_gemm_table_a`] on a given tier.
fn table_a_on(
    tier: Tier,
    (dst, ldc): (&mut [f32], usize),
    (m, n, k): (usize, usize, usize),
    a: Table<'_>,
    b: Rows<'_>,
    start: Start<'_>,
) {
    assert!(a.offsets.len() >= m && a.data.len() >= a.extent(m, k), "chain_gemm: A's table or data too short");
    assert!(b.holds(k, n), "chain_gemm: B too short");
    let ops = Operands {
        a: a.data[a.base.min(a.data.len())..].as_ptr(),
        rs: 0,
        cs: 1,
        a_tab: a.offsets.as_ptr(),
        ..Operands::plain(View::rows(&[], 0), b)
    };
    run(tier, (dst, ldc), (m, n, k), ops, start);
}

/// [`chain_gemm`] with B's rows from a table, `B[p, j] = b.data[b.base + b.offsets[p] + j]`, into
/// `dst` of row stride `ldc` (≥ n): a convolution's ∂W = ∂Yᵀ·windows, the windows read where they
/// lie, with the bits of the window matrix's product.
///
/// # Panics
/// As [`chain_gemm`], and when the table has fewer than k offsets or `ldc < n`.
pub fn chain_gemm_table_b(
    (dst, ldc): (&mut [f32], usize),
    (m, n, k): (usize, usize, usize),
    a: View<'_>,
    b: Table<'_>,
    start: Start<'_>,
) {
    table_b_on(best_tier(), (dst, ldc), (m, n, k), a, b, start);
}

/// [`chain_gemm_table_b`] on a given tier.
fn table_b_on(
    tier: Tier,
    (dst, ldc): (&mut [f32], usize),
    (m, n, k): (usize, usize, usize),
    a: View<'_>,
    b: Table<'_>,
    start: Start<'_>,
) {
    assert!(a.data.len() >= a.extent(m, k), "chain_gemm: A too short");
    assert!(b.offsets.len() >= k && b.data.len() >= b.extent(k, n), "chain_gemm: B's table or data too short");
    let ops = Operands {
        b: b.data[b.base.min(b.data.len())..].as_ptr(),
        b_tab: b.offsets.as_ptr(),
        ..Operands::plain(a, Rows { data: &[], ld: 0 })
    };
    run(tier, (dst, ldc), (m, n, k), ops, start);
}

/// Where the kernels read A and B: `A[i, p]` at `a + i·rs + p·cs`, or at `a + a_tab[i] + p`
/// (mode [`TABLE_A`]); `B[p, j]` at `b + p·ldb + j`, or at `b + b_tab[p] + j` ([`TABLE_B`]).
#[derive(Clone, Copy)]
struct Operands {
    a: *const f32,
    rs: usize,
    cs: usize,
    a_tab: *const u32,
    b: *const f32,
    ldb: usize,
    b_tab: *const u32,
}

impl Operands {
    fn plain(a: View<'_>, b: Rows<'_>) -> Operands {
        let null = std::ptr::null();
        Operands { a: a.data.as_ptr(), rs: a.rs, cs: a.cs, a_tab: null, b: b.data.as_ptr(), ldb: b.ld, b_tab: null }
    }

    fn mode(&self) -> u8 {
        if !self.a_tab.is_null() {
            TABLE_A
        } else if !self.b_tab.is_null() {
            TABLE_B
        } else {
            PLAIN
        }
    }

    /// A's element (i, p). SAFETY: i < m, p < k of a product whose operands the caller checked.
    unsafe fn a_at(&self, i: usize, p: usize) -> f32 {
        match self.mode() {
            TABLE_A => *self.a.add(*self.a_tab.add(i) as usize + p),
            _ => *self.a.add(i * self.rs + p * self.cs),
        }
    }

    /// B's row p from column j. SAFETY: as [`Operands::a_at`].
    unsafe fn b_row(&self, p: usize, j: usize) -> *const f32 {
        match self.mode() {
            TABLE_B => self.b.add(*self.b_tab.add(p) as usize + j),
            _ => self.b.add(p * self.ldb + j),
        }
    }
}

/// The product on `tier` after the checks common to every operand form (C's size, the tier, the
/// start row; the caller has checked A and B).
fn run(tier: Tier, (dst, ldc): (&mut [f32], usize), (m, n, k): (usize, usize, usize), ops: Operands, start: Start<'_>) {
    assert!(ldc >= n && (m == 0 || dst.len() >= (m - 1) * ldc + n), "chain_gemm: C too short");
    assert!(supported(tier), "chain_gemm: the {tier:?} kernel does not run on this CPU");
    assert!(!matches!(start, Start::Row(r) if r.len() < n), "chain_gemm: the start row is shorter than n");
    if m == 0 || n == 0 {
        return;
    }
    let c = (dst.as_mut_ptr(), ldc);
    match tier {
        // SAFETY: the callers' asserts keep every index in bounds (the kernels read A's (i, p) and
        // B's (p, j) for i < m, p < k, j < n, as `Operands` says, and write C at i·ldc + j,
        // masking the lanes past n), and the CPU has the tier's features (asserted).
        #[cfg(target_arch = "x86_64")]
        Tier::Avx512 => unsafe { x86::gemm_avx512(c, (m, n, k), ops, start) },
        #[cfg(target_arch = "x86_64")]
        Tier::Avx2 => unsafe { x86::gemm_avx2(c, (m, n, k), ops, start) },
        // SAFETY: as above.
        _ => unsafe { portable(c, (m, n, k), ops, start) },
    }
}

/// The definition, 16 columns at a time (a shape the compiler vectorises where it can).
///
/// # Safety
/// The operands hold what the shape reads (the callers' checks).
unsafe fn portable((c, ldc): (*mut f32, usize), (m, n, k): (usize, usize, usize), ops: Operands, start: Start<'_>) {
    for i in 0..m {
        for j0 in (0..n).step_by(16) {
            let w = (n - j0).min(16);
            let c = std::slice::from_raw_parts_mut(c.add(i * ldc + j0), w);
            let mut acc = [0f32; 16];
            match start {
                Start::Zero => {}
                Start::Dst => acc[..w].copy_from_slice(c),
                Start::Row(row) => acc[..w].copy_from_slice(&row[j0..j0 + w]),
            }
            for p in 0..k {
                let aip = ops.a_at(i, p);
                let row = std::slice::from_raw_parts(ops.b_row(p, j0), w);
                for (s, &bv) in acc.iter_mut().zip(row) {
                    *s = aip.mul_add(bv, *s);
                }
            }
            c.copy_from_slice(&acc[..w]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The AVX-512 and AVX2 tiles. Each tile function is generic over its row count `R` and
    //! vector count `V`, so that its accumulators are fixed-size arrays the compiler keeps in
    //! registers; [`tiles!`] instantiates the ones a call needs.

    use super::{Operands, Start, PLAIN, TABLE_A, TABLE_B};

    /// Where a tile's chains start: [`Start`] as a pointer at the tile's first column.
    #[derive(Clone, Copy)]
    enum Init {
        Zero,
        Dst,
        Row(*const f32),
    }
    use std::arch::x86_64::*;

    /// Rows per tile (the most: a tile of 6 × 4 vectors holds 24 accumulators).
    const MR: usize = 6;

    /// A tile's operands: C at `c` (row stride `ldc`), A's rows `i0..` (strides `rs`, `cs`, or
    /// the table `a_tab` from row i0), B's columns `j0..` (row stride `ldb`, or the table
    /// `b_tab`), the chain length `k`.
    #[derive(Clone, Copy)]
    struct Tile {
        c: *mut f32,
        ldc: usize,
        a: *const f32,
        rs: usize,
        cs: usize,
        a_tab: *const u32,
        b: *const f32,
        ldb: usize,
        b_tab: *const u32,
        k: usize,
        init: Init,
    }

    /// Runs `$tile::<mr, nv, $mode>` for runtime `mr` in 1..=6 and `nv` in 1..=`$max_nv`.
    macro_rules! tiles {
        ($tile:ident, $mode:ident, $mr:expr, $nv:expr, $t:expr, $mask:expr, $max_nv:tt) => {
            match ($mr, $nv) {
                (6, 1) => $tile::<6, 1, $mode>($t, $mask),
                (5, 1) => $tile::<5, 1, $mode>($t, $mask),
                (4, 1) => $tile::<4, 1, $mode>($t, $mask),
                (3, 1) => $tile::<3, 1, $mode>($t, $mask),
                (2, 1) => $tile::<2, 1, $mode>($t, $mask),
                (1, 1) => $tile::<1, 1, $mode>($t, $mask),
                (6, 2) => $tile::<6, 2, $mode>($t, $mask),
                (5, 2) => $tile::<5, 2, $mode>($t, $mask),
                (4, 2) => $tile::<4, 2, $mode>($t, $mask),
                (3, 2) => $tile::<3, 2, $mode>($t, $mask),
                (2, 2) => $tile::<2, 2, $mode>($t, $mask),
                (1, 2) => $tile::<1, 2, $mode>($t, $mask),
                _ => tiles!(@wide $tile, $mode, $mr, $nv, $t, $mask, $max_nv),
            }
        };
        (@wide $tile:ident, $mode:ident, $mr:expr, $nv:expr, $t:expr, $mask:expr, 4) => {
            match ($mr, $nv) {
                (6, 3) => $tile::<6, 3, $mode>($t, $mask),
                (5, 3) => $tile::<5, 3, $mode>($t, $mask),
                (4, 3) => $tile::<4, 3, $mode>($t, $mask),
                (3, 3) => $tile::<3, 3, $mode>($t, $mask),
                (2, 3) => $tile::<2, 3, $mode>($t, $mask),
                (1, 3) => $tile::<1, 3, $mode>($t, $mask),
                (6, 4) => $tile::<6, 4, $mode>($t, $mask),
                (5, 4) => $tile::<5, 4, $mode>($t, $mask),
                (4, 4) => $tile::<4, 4, $mode>($t, $mask),
                (3, 4) => $tile::<3, 4, $mode>($t, $mask),
                (2, 4) => $tile::<2, 4, $mode>($t, $mask),
                (1, 4) => $tile::<1, 4, $mode>($t, $mask),
                _ => unreachable!("tile shapes are 1..=6 × 1..=4"),
            }
        };
        (@wide $tile:ident, $mode:ident, $mr:expr, $nv:expr, $t:expr, $mask:expr, 2) => {
            unreachable!("tile shapes are 1..=6 × 1..=2")
        };
    }

    /// Defines `$name::<R, V, MODE>(tile, mask)`: one `R × V` tile of `$lanes`-lane vectors
    /// (type `$vec`), the last vector of each row masked by `mask` — load C's start (or not), then
    /// for each p: load B's row p, broadcast A's (i, p), one FMA per accumulator; store. MODE says
    /// where A's and B's rows are (`Operands`). The same body for every instruction set, only its
    /// intrinsics differ.
    macro_rules! tile_fn {
        ($name:ident, $features:literal, $lanes:literal, $vec:ty, $mask:ty, $zero:ident, $load:ident, $store:ident,
         $set1:ident, $fmadd:ident) => {
            #[doc = concat!("One `R × V` tile of ", stringify!($lanes), "-lane vectors (see `tile_fn!`).")]
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn $name<const R: usize, const V: usize, const MODE: u8>(t: Tile, mask: $mask) {
                let mut acc = [[$zero(); V]; R];
                // A's rows from the table: their starts, once per tile.
                let a_rows: [*const f32; R] =
                    std::array::from_fn(|i| if MODE == TABLE_A { t.a.add(*t.a_tab.add(i) as usize) } else { t.a });
                match t.init {
                    Init::Zero => {}
                    Init::Dst => {
                        for (i, row) in acc.iter_mut().enumerate() {
                            for (v, s) in row.iter_mut().enumerate() {
                                *s = $load(t.c.add(i * t.ldc + v * $lanes), v + 1 == V, mask);
                            }
                        }
                    }
                    Init::Row(r) => {
                        for row in acc.iter_mut() {
                            for (v, s) in row.iter_mut().enumerate() {
                                *s = $load(r.add(v * $lanes), v + 1 == V, mask);
                            }
                        }
                    }
                }
                for p in 0..t.k {
                    let bp = if MODE == TABLE_B { t.b.add(*t.b_tab.add(p) as usize) } else { t.b.add(p * t.ldb) };
                    let mut bv: [$vec; V] = [$zero(); V];
                    for (v, s) in bv.iter_mut().enumerate() {
                        *s = $load(bp.add(v * $lanes), v + 1 == V, mask);
                    }
                    let ap = t.a.wrapping_add(p * t.cs);
                    for (i, row) in acc.iter_mut().enumerate() {
                        let ai = $set1(if MODE == TABLE_A { *a_rows[i].add(p) } else { *ap.add(i * t.rs) });
                        for (s, &bvv) in row.iter_mut().zip(&bv) {
                            *s = $fmadd(ai, bvv, *s);
                        }
                    }
                }
                for (i, row) in acc.iter().enumerate() {
                    for (v, &s) in row.iter().enumerate() {
                        $store(t.c.add(i * t.ldc + v * $lanes), v + 1 == V, mask, s);
                    }
                }
            }
        };
    }

    /// The tiles of C in order: column panels of up to `max_nv` vectors of `lanes`; in each, the
    /// chains' steps p in blocks of at most `kc` ([`k_block`]); in each block, row blocks of up to
    /// [`MR`]. Each item is `(rows, vectors, tile, lanes used in its last vector)`; a block after
    /// the first starts from C (`Init::Dst`), where the block before left each chain, so the
    /// chains are the unblocked ones bit for bit.
    struct Tiles {
        first: Tile,
        m: usize,
        n: usize,
        k: usize,
        kc: usize,
        lanes: usize,
        max_nv: usize,
        i0: usize,
        j0: usize,
        p0: usize,
    }

    /// The chain steps per block for a product of chain length `k` whose column panels are
    /// `panel` floats wide: B's rows of one block of one panel (`kc · panel` floats) fit in
    /// [`BLOCK_BYTES`], two thirds of a 48 KiB L1 data cache, so the row blocks that follow read
    /// them from L1 rather than L2; the blocks are of equal size. 0 when k is 0.
    fn k_block(k: usize, panel: usize) -> usize {
        let most = (BLOCK_BYTES / (4 * panel)).max(1);
        k.div_ceil(k.div_ceil(most).max(1))
    }

    /// The bytes of B one block of one column panel reads ([`k_block`]). On the Xeon VM (48 KiB
    /// L1), TD3's gradient step (400 × 300 products) took ≈ 6 % less time and the Nature CNN's
    /// update ≈ 8 % less (its dense layer's chains are 3,136 long); SAC's and TQC's steps (256
    /// wide) the same within noise; 24 KiB measured as 32 (docs/dev/perf-log.md).
    const BLOCK_BYTES: usize = 32 * 1024;

    impl Tiles {
        fn new(
            (c, ldc): (*mut f32, usize),
            (m, n, k): (usize, usize, usize),
            ops: Operands,
            start: Start<'_>,
            (lanes, max_nv): (usize, usize),
        ) -> Self {
            let init = match start {
                Start::Zero => Init::Zero,
                Start::Dst => Init::Dst,
                Start::Row(row) => Init::Row(row.as_ptr()),
            };
            let Operands { a, rs, cs, a_tab, b, ldb, b_tab } = ops;
            let first = Tile { c, ldc, a, rs, cs, a_tab, b, ldb, b_tab, k, init };
            let kc = k_block(k, lanes * max_nv);
            Tiles { first, m, n, k, kc, lanes, max_nv, i0: 0, j0: 0, p0: 0 }
        }
    }

    impl Iterator for Tiles {
        type Item = (usize, usize, Tile, usize);

        fn next(&mut self) -> Option<Self::Item> {
            if self.i0 >= self.m {
                self.i0 = 0;
                self.p0 += self.kc;
                if self.p0 >= self.k {
                    self.p0 = 0;
                    self.j0 += self.lanes * self.max_nv;
                }
            }
            if self.j0 >= self.n || self.m == 0 {
                return None;
            }
            let width = (self.n - self.j0).min(self.lanes * self.max_nv);
            let nv = width.div_ceil(self.lanes);
            let mr = (self.m - self.i0).min(MR);
            let f = self.first;
            // The offsets stay inside the operands (the caller's bounds checks): wrapping_add
            // only so that computing them needs no unsafe.
            // A table's modes have rs = 0, cs = 1 (A) and ldb = 0 (B), so the same offsets serve
            // every mode; a table's pointer moves by the rows it skips.
            let p0 = self.p0;
            let t = Tile {
                c: f.c.wrapping_add(self.i0 * f.ldc + self.j0),
                a: f.a.wrapping_add(self.i0 * f.rs + p0 * f.cs),
                a_tab: f.a_tab.wrapping_add(self.i0),
                b: f.b.wrapping_add(self.j0 + p0 * f.ldb),
                b_tab: f.b_tab.wrapping_add(p0),
                k: (self.k - p0).min(self.kc),
                init: match f.init {
                    _ if p0 > 0 => Init::Dst,
                    Init::Row(r) => Init::Row(r.wrapping_add(self.j0)),
                    other => other,
                },
                ..f
            };
            self.i0 += mr;
            Some((mr, nv, t, width - (nv - 1) * self.lanes))
        }
    }

    /// AVX-512: column panels of 4 vectors of 16.
    ///
    /// # Safety
    /// AVX-512F, and the caller's bounds checks.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn gemm_avx512(
        c: (*mut f32, usize),
        (m, n, k): (usize, usize, usize),
        ops: Operands,
        start: Start,
    ) {
        let mode = ops.mode();
        for (mr, nv, t, last) in Tiles::new(c, (m, n, k), ops, start, (16, 4)) {
            let mask: __mmask16 = if last == 16 { 0xffff } else { (1u16 << last) - 1 };
            match mode {
                TABLE_A => tiles!(tile512, TABLE_A, mr, nv, t, mask, 4),
                TABLE_B => tiles!(tile512, TABLE_B, mr, nv, t, mask, 4),
                _ => tiles!(tile512, PLAIN, mr, nv, t, mask, 4),
            }
        }
    }

    /// 16 floats at `p`, only the lanes in `mask` when `masked` (the others read as 0, not read).
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load512(p: *const f32, masked: bool, mask: __mmask16) -> __m512 {
        if masked {
            _mm512_maskz_loadu_ps(mask, p)
        } else {
            _mm512_loadu_ps(p)
        }
    }

    /// 16 floats to `p`, only the lanes in `mask` when `masked`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn store512(p: *mut f32, masked: bool, mask: __mmask16, x: __m512) {
        if masked {
            _mm512_mask_storeu_ps(p, mask, x)
        } else {
            _mm512_storeu_ps(p, x)
        }
    }

    tile_fn!(
        tile512,
        "avx512f",
        16,
        __m512,
        __mmask16,
        _mm512_setzero_ps,
        load512,
        store512,
        _mm512_set1_ps,
        _mm512_fmadd_ps
    );

    /// AVX2 + FMA: column panels of 2 vectors of 8 (12 accumulators of the 16 registers).
    ///
    /// # Safety
    /// AVX2 and FMA, and the caller's bounds checks.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn gemm_avx2(
        c: (*mut f32, usize),
        (m, n, k): (usize, usize, usize),
        ops: Operands,
        start: Start,
    ) {
        let mode = ops.mode();
        for (mr, nv, t, last) in Tiles::new(c, (m, n, k), ops, start, (8, 2)) {
            let lane = |j: usize| if j < last { -1i32 } else { 0 };
            let mask = _mm256_setr_epi32(lane(0), lane(1), lane(2), lane(3), lane(4), lane(5), lane(6), lane(7));
            match mode {
                TABLE_A => tiles!(tile256, TABLE_A, mr, nv, t, mask, 2),
                TABLE_B => tiles!(tile256, TABLE_B, mr, nv, t, mask, 2),
                _ => tiles!(tile256, PLAIN, mr, nv, t, mask, 2),
            }
        }
    }

    /// 8 floats at `p`, only the lanes in `mask` when `masked` (the others read as 0, not read).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn load256(p: *const f32, masked: bool, mask: __m256i) -> __m256 {
        if masked {
            _mm256_maskload_ps(p, mask)
        } else {
            _mm256_loadu_ps(p)
        }
    }

    /// 8 floats to `p`, only the lanes in `mask` when `masked`.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn store256(p: *mut f32, masked: bool, mask: __m256i, x: __m256) {
        if masked {
            _mm256_maskstore_ps(p, mask, x)
        } else {
            _mm256_storeu_ps(p, x)
        }
    }

    tile_fn!(
        tile256,
        "avx2,fma",
        8,
        __m256,
        __m256i,
        _mm256_setzero_ps,
        load256,
        store256,
        _mm256_set1_ps,
        _mm256_fmadd_ps
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32 + seed) * 0.618).sin() * 1.7).collect()
    }

    /// The definition, one element at a time.
    fn reference(c0: &[f32], (m, n, k): (usize, usize, usize), a: View<'_>, b: Rows<'_>, start: Start<'_>) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = match start {
                    Start::Zero => 0.0,
                    Start::Dst => c0[i * n + j],
                    Start::Row(r) => r[j],
                };
                for p in 0..k {
                    s = a.data[i * a.rs + p * a.cs].mul_add(b.data[p * b.ld + j], s);
                }
                c[i * n + j] = s;
            }
        }
        c
    }

    #[test]
    fn every_tier_computes_the_definitions_bits() {
        let tiers: Vec<Tier> =
            [Tier::Avx512, Tier::Avx2, Tier::Portable].into_iter().filter(|&t| supported(t)).collect();
        println!("chain_gemm tiers on this CPU: {tiers:?}");
        let shapes = [(1, 1, 1), (3, 5, 2), (6, 64, 64), (7, 65, 3), (13, 17, 40), (128, 64, 4), (64, 4, 130)];
        // k = 130, 400 and 1,100: the chains in 2, 4 and 9 blocks on the AVX-512 tier (`k_block`), in 1, 1
        // and 3 on AVX2.
        let blocked = [(13, 70, 400), (7, 20, 1100)];
        for &(m, n, k) in shapes.iter().chain(&[(2, 2, 64), (4, 33, 0), (12, 100, 9), (25, 48, 7)]).chain(&blocked) {
            for transposed_a in [false, true] {
                let bias = data(n, 4.2);
                for start in [Start::Zero, Start::Dst, Start::Row(&bias)] {
                    let a_data = data(m * k, 0.3);
                    let a = if transposed_a { View::transposed(&a_data, m) } else { View::rows(&a_data, k) };
                    let ld = n + 3; // a row stride wider than n
                    let b_data = data(k * ld, 1.1);
                    let b = Rows { data: &b_data, ld };
                    let c0 = data(m * n, 2.9);
                    let want = reference(&c0, (m, n, k), a, b, start);
                    for &tier in &tiers {
                        let mut c = c0.clone();
                        chain_gemm_on(tier, &mut c, (m, n, k), a, b, start);
                        let same = c.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                        assert!(same, "{tier:?} {m}x{n}x{k} transposed_a {transposed_a} {start:?}: {c:?} vs {want:?}");
                    }
                }
            }
        }
    }

    /// Rows of `data` at `offsets` (+ `base`), `cols` each, as one row-major matrix.
    fn gathered(data: &[f32], offsets: &[u32], base: usize, cols: usize) -> Vec<f32> {
        offsets.iter().flat_map(|&o| data[base + o as usize..][..cols].to_vec()).collect()
    }

    #[test]
    fn tables_give_the_bits_of_the_gathered_matrix_on_every_tier() {
        let tiers: Vec<Tier> =
            [Tier::Avx512, Tier::Avx2, Tier::Portable].into_iter().filter(|&t| supported(t)).collect();
        let data = data(4000, 0.9);
        // (9, 40, 300): chains in three blocks (`k_block`), each block's A and B from the tables.
        for &(m, n, k) in &[(1, 1, 1), (7, 65, 3), (13, 17, 40), (25, 64, 128), (6, 32, 9), (9, 40, 300)] {
            let bias = super::tests::data(n, 4.2);
            for start in [Start::Zero, Start::Dst, Start::Row(&bias)] {
                let ldc = n + 5; // C inside a wider matrix
                let c0 = super::tests::data(m * ldc, 2.9);
                // A from a table: rows at irregular offsets, overlapping, out of order.
                let a_off: Vec<u32> = (0..m as u32).map(|i| (i * 37 + (i % 3) * 101) % 2900).collect();
                let b_data = super::tests::data(k * n, 1.1);
                let a_rows = gathered(&data, &a_off, 11, k);
                for &tier in &tiers {
                    let mut want = c0.clone();
                    for i in 0..m {
                        let c = &mut want[i * ldc..i * ldc + n];
                        chain_gemm_on(
                            tier,
                            c,
                            (1, n, k),
                            View::rows(&a_rows[i * k..], k),
                            Rows { data: &b_data, ld: n },
                            start,
                        );
                    }
                    let mut got = c0.clone();
                    let a = Table { data: &data, offsets: &a_off, base: 11 };
                    table_a_on(tier, (&mut got, ldc), (m, n, k), a, Rows { data: &b_data, ld: n }, start);
                    assert!(
                        got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()),
                        "A table {tier:?} {m}x{n}x{k} {start:?}"
                    );
                }
                // B from a table, A a transposed view.
                let b_off: Vec<u32> = (0..k as u32).map(|p| (p * 53 + (p % 4) * 7) % 3000).collect();
                let a_data = super::tests::data(k * m, 0.3);
                let b_rows = gathered(&data, &b_off, 5, n);
                for &tier in &tiers {
                    let mut want = vec![0f32; m * n];
                    let mut got = c0.clone();
                    let compact: Vec<f32> = (0..m).flat_map(|i| c0[i * ldc..i * ldc + n].to_vec()).collect();
                    want.copy_from_slice(&compact);
                    let a = View::transposed(&a_data, m);
                    chain_gemm_on(tier, &mut want, (m, n, k), a, Rows { data: &b_rows, ld: n }, start);
                    let b = Table { data: &data, offsets: &b_off, base: 5 };
                    table_b_on(tier, (&mut got, ldc), (m, n, k), a, b, start);
                    for i in 0..m {
                        let same = got[i * ldc..i * ldc + n]
                            .iter()
                            .zip(&want[i * n..(i + 1) * n])
                            .all(|(x, y)| x.to_bits() == y.to_bits());
                        assert!(same, "B table {tier:?} {m}x{n}x{k} {start:?} row {i}");
                        assert_eq!(got[i * ldc + n..(i + 1) * ldc], c0[i * ldc + n..(i + 1) * ldc], "past n untouched");
                    }
                }
            }
        }
    }

    #[test]
    fn tables_too_short_are_refused() {
        let data = vec![1.0f32; 100];
        let b = vec![1.0f32; 16];
        let mut c = vec![0f32; 16];
        let short = std::panic::catch_unwind(move || {
            let a = Table { data: &data, offsets: &[0, 95], base: 0 };
            chain_gemm_table_a((&mut c, 4), (2, 4, 8), a, Rows { data: &b, ld: 4 }, Start::Zero);
        });
        assert!(short.is_err(), "a row past the data's end is refused");
    }

    #[test]
    fn the_product_is_the_matrix_product() {
        let (m, n, k) = (9, 20, 11);
        let (a, b) = (data(m * k, 0.0), data(k * n, 5.0));
        let mut c = vec![0f32; m * n];
        chain_gemm(&mut c, (m, n, k), View::rows(&a, k), Rows { data: &b, ld: n }, Start::Zero);
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum();
                assert!((c[i * n + j] as f64 - want).abs() < 1e-5, "({i}, {j}): {} vs {want}", c[i * n + j]);
            }
        }
    }

    #[test]
    fn a_row_is_the_same_in_any_batch() {
        let (n, k) = (64, 64);
        let (a, b) = (data(130 * k, 0.7), data(k * n, 3.3));
        let mut all = vec![0f32; 130 * n];
        chain_gemm(&mut all, (130, n, k), View::rows(&a, k), Rows { data: &b, ld: n }, Start::Zero);
        for r in [0, 5, 6, 129] {
            let mut one = vec![0f32; n];
            chain_gemm(&mut one, (1, n, k), View::rows(&a[r * k..], k), Rows { data: &b, ld: n }, Start::Zero);
            assert_eq!(one, all[r * n..(r + 1) * n], "row {r}");
        }
    }
}
