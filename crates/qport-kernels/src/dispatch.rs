//! The dispatch table: which backend every kernel of this crate runs on.
//!
//! The table is one [`Isa`], chosen once per process from the CPU's
//! features and two environment variables, and read by every kernel (no
//! kernel detects CPU features itself):
//!
//! - `QPORT_FORCE_GENERIC` set to a non-empty value other than `0` selects
//!   the generic table (the portable scalar code) everywhere, so every
//!   kernel path can be tested on any machine;
//! - `QPORT_SIMD` caps the table: `generic`, `avx2` (AVX2 + FMA: the `f32`
//!   kernels at 8 lanes *and* the AVX2 u8×s8 GEMM instead of VNNI),
//!   `avx512` (AVX-512 without the VNNI GEMM), `avx512-vnni` (the VNNI
//!   GEMM without AMX tiles) or `neon` (NEON without `sdot`); any other
//!   value means no cap. A cap only lowers the table
//!   within its architecture, so the AVX2 kernels can be measured and
//!   tested on an AVX-512 VNNI host.
//!
//! The strided `f32`/`f64` GEMM ([`crate::gemm::gemm`], also the non-AVX-512
//! path of [`crate::pgemm`]) runs on the external `gemm` crate, which picks
//! its own SIMD level once per process from the CPU features and offers no
//! runtime override (no setting or variable caps it; its only ISA control
//! is the cargo feature `nightly`, which adds AVX-512 on a nightly
//! toolchain and which this workspace does not enable). So the table
//! reaches it only as on/off: on the generic table (`QPORT_FORCE_GENERIC`,
//! `QPORT_SIMD=generic`, [`with_generic_kernels`]) the GEMM runs its scalar
//! reference instead; on every other row the crate runs at its own level,
//! AVX2 + FMA on x86-64 (never above it without `nightly`, so
//! `QPORT_SIMD=avx2` holds for it too, and `avx512` does not raise it) and
//! NEON on aarch64.
//!
//! On one thread, [`with_generic_kernels`] and [`with_isa`] run a closure
//! under the generic table or a lower one (the programmatic forms of the
//! two variables); tests use them to run each backend the CPU supports.

use std::cell::Cell;
use std::sync::OnceLock;

/// A row of the dispatch table: the instruction set the kernels run on.
/// x86-64 rows are ordered `Avx2 < Avx512 < Avx512Vnni < Amx`, aarch64 rows
/// `Neon < Dotprod`; `Generic` is below every row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Isa {
    /// The portable scalar code everywhere.
    Generic,
    /// x86-64 AVX2 + FMA: `f32` kernels at 8 lanes, the exact u8×s8 GEMM
    /// on `vpmaddwd` (widened operands).
    Avx2,
    /// x86-64 AVX-512F + BW (with AVX2 + FMA): `f32` kernels at 16 lanes,
    /// the exact u8×s8 GEMM still on AVX2 `vpmaddwd`.
    Avx512,
    /// [`Isa::Avx512`] with AVX-512 VNNI: the exact u8×s8 GEMM on
    /// `vpdpbusd`.
    Avx512Vnni,
    /// [`Isa::Avx512Vnni`] with AMX-INT8 tiles, granted to the process by
    /// the operating system: the blocks of the exact u8×s8 GEMM (reductions
    /// from `k` = 125) and of the direct convolution (channels a multiple
    /// of 64) on `tdpbsud` (16 × 16 sums a tile), the same sums; every
    /// other integer kernel as on [`Isa::Avx512Vnni`].
    Amx,
    /// aarch64 NEON: the exact u8×s8 GEMM on `smull` + `sadalp`.
    Neon,
    /// aarch64 with the dot-product extension: the GEMM on `sdot`.
    Dotprod,
}

impl Isa {
    /// Every row, lowest first within each architecture.
    pub const ALL: [Isa; 7] = [
        Isa::Generic,
        Isa::Avx2,
        Isa::Avx512,
        Isa::Avx512Vnni,
        Isa::Amx,
        Isa::Neon,
        Isa::Dotprod,
    ];

    /// The row's name, as `QPORT_SIMD` spells it (`amx` and `dotprod`
    /// cap nothing: they are the top rows).
    pub fn name(self) -> &'static str {
        match self {
            Isa::Generic => "generic",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Avx512Vnni => "avx512-vnni",
            Isa::Amx => "amx",
            Isa::Neon => "neon",
            Isa::Dotprod => "dotprod",
        }
    }

    /// The instruction the exact u8×s8 GEMM's inner loop runs on this row.
    pub fn int8_gemm(self) -> &'static str {
        match self {
            Isa::Generic => "portable",
            Isa::Avx2 | Isa::Avx512 => "vpmaddwd (AVX2)",
            Isa::Avx512Vnni => "vpdpbusd (AVX-512 VNNI)",
            Isa::Amx => "tdpbsud (AMX-INT8) + vpdpbusd",
            Isa::Neon => "smull + sadalp (NEON)",
            Isa::Dotprod => "sdot",
        }
    }

    /// The SIMD level of the `f32` kernels on this row.
    pub fn f32_simd(self) -> &'static str {
        match self {
            Isa::Avx2 => "AVX2 + FMA",
            Isa::Avx512 | Isa::Avx512Vnni | Isa::Amx => "AVX-512F",
            _ => "portable",
        }
    }

    /// The row named `s` (a `QPORT_SIMD` value), `None` for other text.
    pub fn parse(s: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|i| i.name() == s)
    }

    /// `(architecture, level)`: 0 for `Generic`, 1 for x86-64, 2 for
    /// aarch64; levels ascend within an architecture.
    fn rank(self) -> (u8, u8) {
        match self {
            Isa::Generic => (0, 0),
            Isa::Avx2 => (1, 1),
            Isa::Avx512 => (1, 2),
            Isa::Avx512Vnni => (1, 3),
            Isa::Amx => (1, 4),
            Isa::Neon => (2, 1),
            Isa::Dotprod => (2, 2),
        }
    }

    /// This row lowered to `cap` when `cap` is `Generic` or a lower row of
    /// the same architecture; unchanged otherwise.
    pub fn capped(self, cap: Isa) -> Isa {
        let ((fa, la), (fc, lc)) = (self.rank(), cap.rank());
        if cap == Isa::Generic || (fa == fc && lc < la) {
            cap
        } else {
            self
        }
    }

    /// True when this CPU can run the kernels of this row.
    pub fn supported(self) -> bool {
        detected().capped(self) == self
    }

    /// True when this row is `row` or above it in `row`'s architecture
    /// (the bodies of `row` may run).
    fn at_least(self, row: Isa) -> bool {
        self.capped(row) == row
    }

    /// AVX2 + FMA bodies may run (every x86-64 row).
    pub(crate) fn avx2(self) -> bool {
        self.at_least(Isa::Avx2)
    }

    /// AVX-512F + BW bodies may run.
    pub(crate) fn avx512(self) -> bool {
        self.at_least(Isa::Avx512)
    }

    /// AVX-512 VNNI bodies may run (the VNNI row and the AMX row above
    /// it).
    pub(crate) fn vnni(self) -> bool {
        self.at_least(Isa::Avx512Vnni)
    }

    /// The SIMD level of the `f32` kernels.
    pub(crate) fn level(self) -> Level {
        match self {
            Isa::Avx2 => Level::Avx2,
            Isa::Avx512 | Isa::Avx512Vnni | Isa::Amx => Level::Avx512,
            _ => Level::Generic,
        }
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether this CPU has AVX-512 VBMI (byte permutes across a vector).
/// Not a row of the table: the kernels that use it check it beside their
/// row.
pub(crate) fn has_vbmi() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512vbmi")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The highest row this CPU supports (no environment variable consulted).
fn detected() -> Isa {
    static DETECTED: OnceLock<Isa> = OnceLock::new();
    *DETECTED.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Isa {
    use std::arch::is_x86_feature_detected as has;
    if !(has!("avx2") && has!("fma")) {
        Isa::Generic
    } else if !(has!("avx512f") && has!("avx512bw")) {
        Isa::Avx2
    } else if !has!("avx512vnni") {
        Isa::Avx512
    } else if crate::arch::x86_64::amx::granted() {
        Isa::Amx
    } else {
        Isa::Avx512Vnni
    }
}

/// Big-endian aarch64 stays generic: the Arm packing assumes
/// little-endian lanes.
#[cfg(target_arch = "aarch64")]
fn detect() -> Isa {
    use std::arch::is_aarch64_feature_detected as has;
    if cfg!(target_endian = "big") || !has!("neon") {
        Isa::Generic
    } else if has!("dotprod") {
        Isa::Dotprod
    } else {
        Isa::Neon
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn detect() -> Isa {
    Isa::Generic
}

/// The process-wide table: [`detected`] under `QPORT_FORCE_GENERIC` and
/// the `QPORT_SIMD` cap, chosen once.
fn process_isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        let generic = std::env::var("QPORT_FORCE_GENERIC").is_ok_and(|v| !v.is_empty() && v != "0");
        if generic {
            return Isa::Generic;
        }
        let cap = std::env::var("QPORT_SIMD").ok();
        match cap.as_deref().and_then(Isa::parse) {
            Some(cap) => detected().capped(cap),
            None => detected(),
        }
    })
}

thread_local! {
    /// A cap for the calling thread ([`with_isa`]).
    static CAP_HERE: Cell<Option<Isa>> = const { Cell::new(None) };
}

/// The row the kernels run on for the calling thread: the process-wide
/// table (see the module docs), lowered inside [`with_isa`] or
/// [`with_generic_kernels`].
///
/// ```
/// let isa = qport_kernels::isa();
/// assert!(isa.supported());
/// let generic = qport_kernels::with_generic_kernels(qport_kernels::isa);
/// assert_eq!(generic, qport_kernels::dispatch::Isa::Generic);
/// ```
pub fn isa() -> Isa {
    let isa = process_isa();
    match CAP_HERE.with(Cell::get) {
        Some(cap) => isa.capped(cap),
        None => isa,
    }
}

/// True when the portable scalar kernels are forced on this thread:
/// `QPORT_FORCE_GENERIC` is set to a non-empty value other than `0`,
/// `QPORT_SIMD=generic`, or the calling thread is inside
/// [`with_generic_kernels`].
pub fn force_generic() -> bool {
    isa() == Isa::Generic
}

/// Runs `f` on the calling thread with the table capped at `cap` (as
/// `QPORT_SIMD` does for the whole process, see [`Isa::capped`]), then
/// restores the previous cap. Kernels that pack operands ahead of time
/// pick their path when packing, so build *and* run a plan inside `f`.
///
/// ```
/// use qport_kernels::dispatch::{with_isa, Isa};
/// let isa = with_isa(Isa::Avx2, qport_kernels::isa);
/// assert!(isa == Isa::Avx2 || !Isa::Avx2.supported());
/// ```
pub fn with_isa<R>(cap: Isa, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Isa>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CAP_HERE.with(|g| g.set(self.0));
        }
    }
    let prev = CAP_HERE.with(Cell::get);
    let cap = match prev {
        Some(p) => p.capped(cap).capped(p),
        None => cap,
    };
    let _restore = Restore(CAP_HERE.with(|g| g.replace(Some(cap))));
    f()
}

/// Runs `f` with every kernel of this crate on its portable scalar path on
/// the calling thread (as `QPORT_FORCE_GENERIC=1` does for the whole
/// process), then restores the previous choice. Kernels that pack
/// operands ahead of time pick their path when packing, so build *and*
/// run a plan inside `f` to run it generically. Used for FP32 control
/// runs: the same model through two float paths.
///
/// ```
/// let generic = qport_kernels::with_generic_kernels(qport_kernels::force_generic);
/// assert!(generic);
/// ```
pub fn with_generic_kernels<R>(f: impl FnOnce() -> R) -> R {
    with_isa(Isa::Generic, f)
}

/// Which SIMD level the fast `f32` kernels run at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    /// The portable scalar reference.
    Generic,
    /// AVX2 + FMA.
    Avx2,
    /// AVX-512F (with AVX2 + FMA).
    Avx512,
}

/// The `f32` SIMD level of the calling thread's table.
pub(crate) fn level() -> Level {
    isa().level()
}

/// True when the CPU can run the `f32` kernels at `l`.
#[cfg(test)]
pub(crate) fn supported(l: Level) -> bool {
    match l {
        Level::Generic => true,
        Level::Avx2 => Isa::Avx2.supported(),
        Level::Avx512 => Isa::Avx512.supported(),
    }
}

/// True when this x86-64 CPU reports AMX-INT8 tiles and the operating
/// system has enabled their state (whether this process may use them is
/// [`Isa::Amx`]'s detection); `false` elsewhere.
///
/// ```
/// use qport_kernels::dispatch::{amx_int8, Isa};
/// // the AMX row is only ever chosen where the tiles are present
/// assert!(amx_int8() || !Isa::Amx.supported());
/// ```
pub fn amx_int8() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::arch::x86_64::amx::present()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Every row this CPU supports, lowest first (`Generic` always).
pub fn supported_isas() -> impl Iterator<Item = Isa> {
    Isa::ALL.into_iter().filter(|i| i.supported())
}

/// Property tests whose body runs on every row of the dispatch table this
/// CPU supports ([`supported_isas`], each inside [`with_isa`]): the one
/// way a fast kernel is held to its scalar reference on every path it
/// dispatches to. Each test reads `fn name(isa; arg in strategy, ..)
/// { body }`, the body using `prop_assert!` and naming the row `isa`.
#[cfg(test)]
macro_rules! proptest_every_isa {
    (
        #![cases($cases:expr)]
        $(
            $(#[doc = $doc:expr])*
            fn $name:ident($isa:ident; $($arg:tt)*) $body:block
        )*
    ) => {
        proptest::proptest! {
            #![proptest_config(proptest::prelude::ProptestConfig::with_cases($cases))]
            $(
                $(#[doc = $doc])*
                #[test]
                fn $name($($arg)*) {
                    for $isa in $crate::dispatch::supported_isas() {
                        $crate::dispatch::with_isa(
                            $isa,
                            || -> Result<(), proptest::test_runner::TestCaseError> {
                                $body
                                Ok(())
                            },
                        )?;
                    }
                }
            )*
        }
    };
}
#[cfg(test)]
pub(crate) use proptest_every_isa;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_lower_only_within_an_architecture() {
        assert_eq!(Isa::Avx512Vnni.capped(Isa::Avx2), Isa::Avx2);
        assert_eq!(Isa::Avx512Vnni.capped(Isa::Avx512), Isa::Avx512);
        assert_eq!(Isa::Amx.capped(Isa::Avx512Vnni), Isa::Avx512Vnni);
        assert_eq!(Isa::Avx512Vnni.capped(Isa::Amx), Isa::Avx512Vnni);
        assert_eq!(Isa::Avx2.capped(Isa::Avx512), Isa::Avx2);
        assert_eq!(Isa::Dotprod.capped(Isa::Neon), Isa::Neon);
        assert_eq!(Isa::Dotprod.capped(Isa::Avx2), Isa::Dotprod);
        assert_eq!(Isa::Avx2.capped(Isa::Neon), Isa::Avx2);
        for i in Isa::ALL {
            assert_eq!(i.capped(Isa::Generic), Isa::Generic);
            assert_eq!(Isa::parse(i.name()), Some(i));
        }
        assert_eq!(Isa::parse("native"), None);
        // the feature predicates follow the order of the rows
        let x86 = |i: Isa| (i.avx2(), i.avx512(), i.vnni());
        assert_eq!(x86(Isa::Generic), (false, false, false));
        assert_eq!(x86(Isa::Avx2), (true, false, false));
        assert_eq!(x86(Isa::Avx512), (true, true, false));
        assert_eq!(x86(Isa::Avx512Vnni), (true, true, true));
        assert_eq!(x86(Isa::Amx), (true, true, true));
        assert_eq!(x86(Isa::Neon), (false, false, false));
        assert_eq!(x86(Isa::Dotprod), (false, false, false));
    }

    #[test]
    fn thread_caps_nest_and_restore() {
        let top = isa();
        with_isa(Isa::Avx512, || {
            with_isa(Isa::Avx512Vnni, || {
                assert_eq!(isa(), top.capped(Isa::Avx512))
            });
            with_generic_kernels(|| assert_eq!(isa(), Isa::Generic));
            assert_eq!(isa(), top.capped(Isa::Avx512));
        });
        assert_eq!(isa(), top);
        assert!(supported_isas().any(|i| i == Isa::Generic));
    }

    /// On an AVX-512 VNNI host the `avx2` cap selects the AVX2 u8×s8 GEMM
    /// (the `QPORT_SIMD=avx2` fix: the VNNI GEMM used to ignore the cap).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_cap_selects_the_avx2_int8_gemm() {
        if !isa().vnni() {
            return;
        }
        with_isa(Isa::Avx2, || {
            assert_eq!(isa(), Isa::Avx2);
            assert_eq!(isa().int8_gemm(), "vpmaddwd (AVX2)");
            assert!(!crate::vnni::available());
            assert!(crate::avx2q::available());
        });
    }

    /// On an AMX host the `avx512-vnni` cap turns the tiles off (the
    /// VNNI GEMM runs alone), and the VNNI kernels stay on under the AMX
    /// row.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vnni_cap_turns_the_amx_tiles_off() {
        if isa() != Isa::Amx {
            return;
        }
        assert!(crate::vnni::available());
        with_isa(Isa::Avx512Vnni, || {
            assert_eq!(isa(), Isa::Avx512Vnni);
            assert_eq!(isa().int8_gemm(), "vpdpbusd (AVX-512 VNNI)");
            assert!(crate::vnni::available());
        });
    }
}
