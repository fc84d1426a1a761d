//! A validator for the subset of JSON Schema (draft 2020-12) that qport's
//! documented schemas use: `type` (one name or a list; `integer` is a
//! number without a fraction), `properties`, `required`, `items`, `enum`,
//! `additionalProperties` (`false` or a schema), `$defs` with local
//! `$ref`s (`#/$defs/NAME`), `minimum`, and the annotations `$schema`,
//! `$id`, `$comment`, `title` and `description`. Any other keyword is an
//! error, so a schema cannot pass by using a keyword this validator would
//! silently ignore.
//!
//! ```
//! use serde_json::json;
//! let schema = json!({
//!     "type": "object",
//!     "properties": { "n": { "type": "integer", "minimum": 0 } },
//!     "required": ["n"],
//!     "additionalProperties": false
//! });
//! assert!(qport_tests::schema::validate(&schema, &json!({"n": 3})).is_ok());
//! let errs = qport_tests::schema::validate(&schema, &json!({"n": -1, "x": 1})).unwrap_err();
//! assert_eq!(errs.len(), 2);
//! ```

use serde_json::Value;

/// Keywords that constrain values.
const KEYWORDS: [&str; 9] = [
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "additionalProperties",
    "$defs",
    "$ref",
    "minimum",
];
/// Keywords that only annotate.
const ANNOTATIONS: [&str; 5] = ["$schema", "$id", "$comment", "title", "description"];

/// The documented schema of the study report,
/// `docs/schemas/study-report.schema.json` (`qport.study/1`).
///
/// # Panics
/// Panics (failing the test) when the file is missing or not JSON.
pub fn study_report() -> Value {
    let p = crate::repo_root().join("docs/schemas/study-report.schema.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Checks `value` against `schema`; every violation (and every use of a
/// keyword outside the subset) is one message naming the JSON pointer of
/// the value (or of the schema) concerned.
pub fn validate(schema: &Value, value: &Value) -> Result<(), Vec<String>> {
    let mut errors = vec![];
    let v = Validator { root: schema };
    v.check_schema(schema, "#", &mut errors);
    if errors.is_empty() {
        v.check(schema, value, "", &mut errors, 0);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

struct Validator<'a> {
    root: &'a Value,
}

fn type_matches(name: &str, v: &Value) -> Option<bool> {
    Some(match name {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        _ => return None,
    })
}

impl Validator<'_> {
    /// Checks the schema itself: known keywords, well-formed values,
    /// resolvable references.
    fn check_schema(&self, s: &Value, at: &str, errors: &mut Vec<String>) {
        let Some(m) = s.as_object() else {
            errors.push(format!("schema {at}: a schema must be an object"));
            return;
        };
        for (k, x) in m {
            if !KEYWORDS.contains(&k.as_str()) && !ANNOTATIONS.contains(&k.as_str()) {
                errors.push(format!("schema {at}: unsupported keyword `{k}`"));
                continue;
            }
            let here = format!("{at}/{k}");
            match k.as_str() {
                "type" => {
                    let names: Vec<&Value> = match x {
                        Value::Array(a) => a.iter().collect(),
                        other => vec![other],
                    };
                    for n in names {
                        if n.as_str()
                            .and_then(|n| type_matches(n, &Value::Null))
                            .is_none()
                        {
                            errors.push(format!("schema {here}: unknown type {n}"));
                        }
                    }
                }
                "properties" | "$defs" => match x.as_object() {
                    Some(props) => {
                        for (name, sub) in props {
                            self.check_schema(sub, &format!("{here}/{name}"), errors);
                        }
                    }
                    None => errors.push(format!("schema {here}: must be an object")),
                },
                "required" if !x.as_array().is_some_and(|a| a.iter().all(Value::is_string)) => {
                    errors.push(format!("schema {here}: must be a list of names"))
                }
                "items" => self.check_schema(x, &here, errors),
                "additionalProperties" if !x.is_boolean() => self.check_schema(x, &here, errors),
                "enum" if !x.is_array() => errors.push(format!("schema {here}: must be a list")),
                "minimum" if !x.is_number() => {
                    errors.push(format!("schema {here}: must be a number"))
                }
                "$ref" if x.as_str().and_then(|r| self.resolve(r)).is_none() => {
                    errors.push(format!("schema {here}: unresolvable reference {x}"))
                }
                _ => {}
            }
        }
    }

    /// The schema a local reference names.
    fn resolve(&self, r: &str) -> Option<&Value> {
        let name = r.strip_prefix("#/$defs/")?;
        self.root.get("$defs")?.get(name)
    }

    fn check(&self, s: &Value, v: &Value, at: &str, errors: &mut Vec<String>, depth: usize) {
        let path = if at.is_empty() { "/" } else { at };
        if depth > 64 {
            errors.push(format!("{path}: schema references nest too deep"));
            return;
        }
        let Some(m) = s.as_object() else { return };
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            if let Some(target) = self.resolve(r) {
                self.check(target, v, at, errors, depth + 1);
            }
        }
        if let Some(t) = m.get("type") {
            let names: Vec<&str> = match t {
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                other => other.as_str().into_iter().collect(),
            };
            if !names.iter().any(|n| type_matches(n, v) == Some(true)) {
                errors.push(format!(
                    "{path}: expected {}, found {}",
                    names.join(" or "),
                    kind(v)
                ));
                return;
            }
        }
        if let Some(e) = m.get("enum").and_then(Value::as_array) {
            if !e.contains(v) {
                errors.push(format!(
                    "{path}: {v} is not one of {}",
                    Value::Array(e.clone())
                ));
            }
        }
        if let (Some(min), Some(x)) = (m.get("minimum").and_then(Value::as_f64), v.as_f64()) {
            if x < min {
                errors.push(format!("{path}: {x} is below the minimum {min}"));
            }
        }
        if let Some(obj) = v.as_object() {
            if let Some(req) = m.get("required").and_then(Value::as_array) {
                for r in req.iter().filter_map(Value::as_str) {
                    if !obj.contains_key(r) {
                        errors.push(format!("{path}: missing required property `{r}`"));
                    }
                }
            }
            let props = m.get("properties").and_then(Value::as_object);
            for (k, x) in obj {
                let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match props.and_then(|p| p.get(k)) {
                    Some(sub) => self.check(sub, x, &here, errors, depth + 1),
                    None => match m.get("additionalProperties") {
                        Some(Value::Bool(false)) => {
                            errors.push(format!("{path}: property `{k}` is not allowed"))
                        }
                        Some(sub @ Value::Object(_)) => {
                            self.check(sub, x, &here, errors, depth + 1)
                        }
                        _ => {}
                    },
                }
            }
        }
        if let (Some(items), Some(a)) = (m.get("items"), v.as_array()) {
            for (i, x) in a.iter().enumerate() {
                self.check(items, x, &format!("{at}/{i}"), errors, depth + 1);
            }
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_keywords_are_errors() {
        let s = json!({ "type": "string", "pattern": "^a" });
        let e = validate(&s, &json!("b")).unwrap_err();
        assert_eq!(e, ["schema #: unsupported keyword `pattern`"]);
        let s = json!({ "items": { "oneOf": [] } });
        assert!(validate(&s, &json!([])).unwrap_err()[0].contains("`oneOf`"));
    }

    #[test]
    fn references_types_and_nesting() {
        let s = json!({
            "$defs": { "P": { "type": "object", "properties": { "x": { "type": ["number", "null"] } },
                              "required": ["x"], "additionalProperties": false } },
            "type": "array",
            "items": { "$ref": "#/$defs/P" }
        });
        assert!(validate(&s, &json!([{ "x": 1.5 }, { "x": null }])).is_ok());
        let e = validate(&s, &json!([{ "x": "a" }, {}])).unwrap_err();
        assert_eq!(
            e,
            [
                "/0/x: expected number or null, found string",
                "/1: missing required property `x`"
            ]
        );
        let bad = json!({ "$ref": "#/$defs/Q" });
        assert!(validate(&bad, &json!(1)).unwrap_err()[0].contains("unresolvable"));
    }

    #[test]
    fn integers_enums_minimum_and_maps() {
        let s = json!({ "type": "object",
                        "additionalProperties": { "type": "integer", "minimum": 0 } });
        assert!(validate(&s, &json!({ "a": 1, "b": 0 })).is_ok());
        let e = validate(&s, &json!({ "a": 1.5, "b": -2 })).unwrap_err();
        assert_eq!(
            e,
            [
                "/a: expected integer, found number",
                "/b: -2 is below the minimum 0"
            ]
        );
        let s = json!({ "enum": ["info", "error"] });
        assert!(validate(&s, &json!("info")).is_ok());
        assert!(validate(&s, &json!("warn")).is_err());
    }
}
