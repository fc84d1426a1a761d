//! The host's cache sizes, for kernels and operators that size their
//! blocks to what stays in a core's cache.
//!
//! ```
//! // Some(bytes) where the system reports a level-2 cache, else None
//! if let Some(l2) = qport_kernels::cache::l2_bytes() {
//!     assert!(l2 >= 64 << 10);
//! }
//! ```

use std::sync::OnceLock;

/// Bytes of one core's level-2 cache (its unified or data L2), as the
/// system reports it for CPU 0 (Linux: `/sys/devices/system/cpu/cpu0/cache`),
/// read once per process; `None` where it does not say (other systems,
/// restricted containers) or reports less than 64 KiB.
pub fn l2_bytes() -> Option<usize> {
    static L2: OnceLock<Option<usize>> = OnceLock::new();
    *L2.get_or_init(|| detect_l2().filter(|&b| b >= 64 << 10))
}

/// The level-2 entry of CPU 0's cache description.
fn detect_l2() -> Option<usize> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    l2_in(std::path::Path::new("/sys/devices/system/cpu/cpu0/cache"))
}

/// The size of the unified or data level-2 cache among the `index*`
/// entries of a Linux CPU cache directory `base`.
fn l2_in(base: &std::path::Path) -> Option<usize> {
    (0..16).find_map(|i| {
        let dir = base.join(format!("index{i}"));
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
        let (level, kind) = (read("level")?, read("type")?);
        (level.trim() == "2" && matches!(kind.trim(), "Unified" | "Data"))
            .then(|| parse_size(read("size")?.trim()))
            .flatten()
    })
}

/// A cache size as Linux writes it: bytes, or a count with a `K`, `M` or
/// `G` suffix (binary units); `None` for anything else.
fn parse_size(s: &str) -> Option<usize> {
    let (digits, shift) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 10),
        b'M' | b'm' => (&s[..s.len() - 1], 20),
        b'G' | b'g' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    digits.parse::<usize>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_linux_writes_them() {
        assert_eq!(parse_size("2048K"), Some(2 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size("12X"), None);
        assert_eq!(parse_size("-1K"), None);
    }

    #[test]
    fn the_level_2_entry_is_found_among_the_others() {
        let dir = std::env::temp_dir().join(format!("qport-cache-{}", std::process::id()));
        let entry = |i: usize, level: &str, kind: &str, size: &str| {
            let d = dir.join(format!("index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            for (f, v) in [("level", level), ("type", kind), ("size", size)] {
                std::fs::write(d.join(f), format!("{v}\n")).unwrap();
            }
        };
        entry(0, "1", "Data", "48K");
        entry(1, "1", "Instruction", "64K");
        entry(3, "3", "Unified", "491520K");
        assert_eq!(l2_in(&dir), None, "no level-2 entry yet");
        entry(2, "2", "Unified", "2048K");
        assert_eq!(l2_in(&dir), Some(2 << 20));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(l2_in(&dir), None, "no directory");
    }
}
