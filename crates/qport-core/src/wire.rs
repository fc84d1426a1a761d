//! Serde ("wire") spellings of values for human text: the name a policy,
//! precision or platform field has in JSON and config files, so tables
//! and messages say `int32-dequantize`, never a Rust debug form.

use serde::Serialize;

/// The JSON spelling of `value` as plain text: a string as is (`"q31-shift"`
/// -> `q31-shift`), a list joined with `, `, an object as `key value`
/// pairs, anything else as JSON.
///
/// ```
/// #[derive(serde::Serialize)]
/// #[serde(rename_all = "kebab-case")]
/// enum Mode { HalfEven, HalfUp }
/// assert_eq!(qport_core::wire::wire(&Mode::HalfEven), "half-even");
/// assert_eq!(qport_core::wire::wire(&vec![Mode::HalfEven, Mode::HalfUp]), "half-even, half-up");
/// ```
pub fn wire<T: Serialize>(value: &T) -> String {
    fn flat(v: &serde_json::Value) -> String {
        match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(a) => a.iter().map(flat).collect::<Vec<_>>().join(", "),
            serde_json::Value::Object(m) => m
                .iter()
                .map(|(k, v)| format!("{k} {}", flat(v)))
                .collect::<Vec<_>>()
                .join(", "),
            other => other.to_string(),
        }
    }
    match serde_json::to_value(value) {
        Ok(v) => flat(&v),
        Err(e) => e.to_string(),
    }
}
