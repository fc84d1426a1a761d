//! The blocks of the exact u8×s8 GEMM on AMX-INT8 tiles (`tdpbsud`), for
//! the dispatch row [`crate::Isa::Amx`]: the VNNI kernel's operands and
//! epilogue ([`crate::vnni`]), its 6 × 64 register tile replaced by a
//! 32 × 32 block of four 16 × 16 accumulator tiles.
//!
//! `tdpbsud` multiplies *signed* bytes of its first operand, whose rows
//! are the output's rows (the weights `A`), by *unsigned* bytes of its
//! second, whose columns are the output's columns (the activations `B`),
//! in groups of four along `k`, into i32 sums without saturation: the
//! VNNI kernel's products, so its zero-point correction (`Σ AB − zb·Σ_p A
//! − za·Σ_p B + k·za·zb`, wrapping i32) gives the same exact sums, bit for
//! bit [`crate::igemm::igemm`]'s (property tests hold them equal).
//!
//! Layouts: a tile row of `A` is 16 quads of one row (`A`'s rows padded to
//! a multiple of 32 and its quads to a multiple of 16 with zeros, cut into
//! 1 KiB tiles, [`a_tiles`]); a tile of `B` is 16 consecutive steps of
//! four `k` (rows) of 16 columns (64 bytes a row): the GEMM packs `B` so
//! that a tile's rows are adjacent, the direct convolution reads them
//! where the channel-quad image holds them, a plane apart. Padded bytes
//! are zero in `A`, so they add nothing.
//!
//! The tiles are a per-thread state: every block of work loads the tile
//! configuration first and releases the tiles after. Linux hands the tile
//! data state to a process only on request ([`granted`], asked once when
//! the dispatch table is chosen).

use crate::int8::packed::PackedI8;
use std::arch::asm;

/// Output rows of a block (two accumulator tiles of 16 rows).
pub(crate) const RB: usize = 32;
/// Output columns of a block (two accumulator tiles of 16 columns).
pub(crate) const CB: usize = 32;
/// Steps of four `k` a tile pass consumes: a tile row of `A` holds 16
/// quads, a tile of `B` 16 steps.
pub(crate) const KT: usize = 16;

/// True when this CPU reports AMX-TILE and AMX-INT8 (CPUID leaf 7 EDX
/// bits 24 and 25; the standard detection macro is not stable for AMX)
/// and the operating system has enabled the tile state (XCR0 bits 17 and
/// 18). Linux also wants the process to ask for the tile data
/// ([`granted`]).
pub(crate) fn present() -> bool {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    let (max_leaf, ecx1) = (__cpuid(0).eax, __cpuid(1).ecx);
    if max_leaf < 7 || ecx1 & (1 << 27) == 0 {
        // no leaf 7, or the OS has not enabled XSAVE (so no XGETBV)
        return false;
    }
    if __cpuid_count(7, 0).edx & (0b11 << 24) != 0b11 << 24 {
        return false;
    }
    // SAFETY: OSXSAVE is set (checked above), so XGETBV is available.
    let xcr0 = unsafe { xgetbv0() };
    xcr0 & (0b11 << 17) == 0b11 << 17
}

/// XCR0, the OS-enabled register state.
///
/// # Safety
/// The CPU must report OSXSAVE (CPUID leaf 1 ECX bit 27).
#[target_feature(enable = "xsave")]
unsafe fn xgetbv0() -> u64 {
    // SAFETY: the caller guarantees OSXSAVE, which makes XGETBV available.
    unsafe { std::arch::x86_64::_xgetbv(0) }
}

/// True when the AMX-INT8 tiles are [`present`] and the operating system
/// lets this process use them: on Linux the permission to use the tile
/// data, asked for here (`arch_prctl(ARCH_REQ_XCOMP_PERM)`, once per
/// process; idempotent). `false` on other systems.
pub(crate) fn granted() -> bool {
    present() && request_tile_data()
}

/// Asks Linux for the tile data state (`arch_prctl(ARCH_REQ_XCOMP_PERM,
/// XFEATURE_XTILEDATA)`); `true` when granted.
#[cfg(target_os = "linux")]
fn request_tile_data() -> bool {
    const SYS_ARCH_PRCTL: i64 = 158;
    const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
    const XFEATURE_XTILEDATA: i64 = 18;
    let ret: i64;
    // SAFETY: the arch_prctl system call with these arguments only
    // changes the process's permitted extended state; it reads and writes
    // no user memory. `syscall` clobbers rcx and r11.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") SYS_ARCH_PRCTL => ret,
            in("rdi") ARCH_REQ_XCOMP_PERM,
            in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack, preserves_flags),
        )
    };
    ret == 0
}

#[cfg(not(target_os = "linux"))]
fn request_tile_data() -> bool {
    false
}

/// The tile configuration: palette 1, all eight tiles 16 rows of 64
/// bytes (accumulators `tmm0`–`tmm3`, `A` in `tmm4`–`tmm5`, `B` in
/// `tmm6`–`tmm7`).
#[repr(C, align(64))]
struct Config([u8; 64]);

static CONFIG: Config = {
    let mut c = [0u8; 64];
    c[0] = 1;
    let mut t = 0;
    while t < 8 {
        // bytes per row (u16, little-endian), then rows
        c[16 + 2 * t] = 64;
        c[48 + t] = 16;
        t += 1;
    }
    Config(c)
};

/// Runs `f` with the tiles configured on this thread, then releases them.
///
/// # Safety
/// The process must hold the tiles ([`granted`]).
#[inline]
pub(crate) unsafe fn with_tiles<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: the tiles are granted (the caller's contract); the
    // configuration is 64 readable bytes.
    unsafe {
        asm!("ldtilecfg [{0}]", in(reg) CONFIG.0.as_ptr(), options(nostack, readonly, preserves_flags))
    };
    let r = f();
    // SAFETY: as above; releasing returns the tiles to their initial
    // state.
    unsafe { asm!("tilerelease", options(nostack, nomem, preserves_flags)) };
    r
}

/// Quads of a row of `A` the tiles read: `A`'s quads per row rounded up
/// to [`KT`].
pub(crate) fn padded_quads(a: &PackedI8) -> usize {
    a.kq.div_ceil(KT) * KT
}

/// `A` as the tiles read it ([`PackedI8::tiles`]): rows padded to a
/// multiple of [`RB`] and quads to [`padded_quads`] with zeros, cut into
/// tiles of 16 rows × 16 quads (1 KiB, one row of 64 bytes after the
/// other): the tile of rows `16·h..` and quads `16·g..` at `256 · (h ·
/// groups + g)`.
pub(crate) fn a_tiles(a: &PackedI8) -> &[i32] {
    let len = a.m.div_ceil(RB) * RB * padded_quads(a);
    let (buf, off) = a.tiles.get_or_init(|| {
        let (m, kq) = (a.m, a.kq);
        let kp = padded_quads(a);
        let groups = kp / KT;
        // (the tiles start on a cache line, so no row of 64 bytes
        // straddles two)
        let mut buf = vec![0i32; len + crate::aligned::slack::<i32>()];
        let off = crate::aligned::line_offset(&buf);
        let v = &mut buf[off..off + len];
        for i in 0..m {
            for t in 0..kq {
                let at = 256 * ((i / 16) * groups + t / KT) + 16 * (i % 16) + t % KT;
                v[at] = a.quads[i * kq + t];
            }
        }
        (buf, off)
    });
    &buf[*off..*off + len]
}

/// An output block's sums as the tiles store them: accumulator tile `t`
/// (`2 · row half + column half`) at `256 · t`, 16 rows of 16 i32.
#[repr(C, align(64))]
pub(crate) struct Block(pub(crate) [i32; 4 * 256]);

/// The sums `Σ_p A[i][p]·B[p][j]` of a 32 × 32 block into `acc`, in
/// `groups` passes of [`KT`] steps: pass `g` multiplies the `A` tiles at
/// `a[h] + 256·g` (row halves `h`, [`a_tiles`]) by the `B` tiles `b(g)`
/// (column halves; 16 rows of 64 bytes, `sb` bytes apart).
///
/// # Safety
/// The tiles must be configured on this thread ([`with_tiles`]); the
/// `groups` tiles from each `a[h]` and every `B` tile `b(g)` lie inside
/// their allocations.
#[inline]
pub(crate) unsafe fn block(
    a: [*const i32; 2],
    b: impl Fn(usize) -> [*const u8; 2],
    sb: usize,
    groups: usize,
    acc: &mut Block,
) {
    // SAFETY: the tiles are configured (the caller's contract); tilezero
    // touches no memory.
    unsafe {
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            options(nostack, nomem, preserves_flags)
        )
    };
    for g in 0..groups {
        let [b0, b1] = b(g);
        // SAFETY: the caller's contract: the tiles of pass g lie inside.
        unsafe {
            asm!(
                "tileloadd tmm4, [{a0} + {sa}]",
                "tileloadd tmm6, [{b0} + {sb}]",
                "tdpbsud tmm0, tmm4, tmm6",
                "tileloadd tmm7, [{b1} + {sb}]",
                "tdpbsud tmm1, tmm4, tmm7",
                "tileloadd tmm5, [{a1} + {sa}]",
                "tdpbsud tmm2, tmm5, tmm6",
                "tdpbsud tmm3, tmm5, tmm7",
                a0 = in(reg) a[0].add(256 * g),
                a1 = in(reg) a[1].add(256 * g),
                b0 = in(reg) b0,
                b1 = in(reg) b1,
                sa = in(reg) 64usize,
                sb = in(reg) sb,
                options(nostack, readonly, preserves_flags)
            );
        }
    }
    let c = acc.0.as_mut_ptr();
    // SAFETY: the tiles are configured; `acc` holds four tiles of 16 rows
    // of 64 bytes.
    unsafe {
        asm!(
            "tilestored [{c} + {s}], tmm0",
            "tilestored [{c} + {s} + 1024], tmm1",
            "tilestored [{c} + {s} + 2048], tmm2",
            "tilestored [{c} + {s} + 3072], tmm3",
            c = in(reg) c,
            s = in(reg) 64usize,
            options(nostack, preserves_flags)
        )
    };
}
