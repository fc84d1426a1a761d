//! Name patterns: `*` globs over node and test names.

/// Matches `name` against a pattern where `*` matches any run of
/// characters (including none); every other character matches itself.
///
/// ```
/// use qport_core::pattern::glob;
/// assert!(glob("blocks.*.conv", "blocks.3.conv"));
/// assert!(glob("*", ""));
/// assert!(!glob("stem*", "head/stem"));
/// ```
pub fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let mut rest = name;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(p) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(p);
        } else {
            match rest.find(p) {
                Some(k) => rest = &rest[k + p.len()..],
                None => return false,
            }
        }
    }
    true
}
