//! A [`LintReport`] as a SARIF 2.1.0 log, so CI systems (code scanning,
//! review bots) show the findings inline: one run whose `tool.driver.rules`
//! is the whole catalogue ([`RULES`]) and whose results name their rule,
//! level, message, the artifact file (`physicalLocation`) and the offending
//! nodes and tensors (`logicalLocations`).

use super::{LintReport, RULES};
use qport_platform::Severity;
use serde_json::{json, Value};

/// The SARIF level of a severity (`info` is SARIF's `note`).
fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// `report` as a SARIF 2.1.0 log; `artifact_uri` is the linted model file
/// as the CI system should resolve it (a path relative to the repository
/// root, or a `file:` URI).
///
/// ```
/// use qport_study::lint::{to_sarif, LintReport, QdqCensus};
/// let r = LintReport { platform: "j6m".into(), census: QdqCensus::default(), findings: vec![], notes: vec![] };
/// let log = to_sarif(&r, "m.onnx");
/// assert_eq!(log["version"], "2.1.0");
/// assert_eq!(log["runs"][0]["tool"]["driver"]["name"], "qport");
/// ```
pub fn to_sarif(report: &LintReport, artifact_uri: &str) -> Value {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.id,
                "shortDescription": { "text": r.summary },
                "fullDescription": { "text": format!("{} Source: {}.", r.summary, r.source) },
                "help": { "text": r.help },
                "defaultConfiguration": { "level": level(r.severity) },
                "properties": { "source": r.source }
            })
        })
        .collect();
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            let index = RULES.iter().position(|r| r.id == f.rule).unwrap_or(0);
            let mut logical: Vec<Value> = f
                .nodes
                .iter()
                .map(|n| json!({ "name": n, "kind": "function" }))
                .collect();
            logical.extend(
                f.tensors
                    .iter()
                    .map(|t| json!({ "name": t, "kind": "variable" })),
            );
            json!({
                "ruleId": f.rule,
                "ruleIndex": index,
                "level": level(f.severity),
                "message": { "text": f.message },
                "locations": [{
                    "physicalLocation": { "artifactLocation": { "uri": artifact_uri, "index": 0 } },
                    "logicalLocations": logical
                }],
                "properties": { "platform": report.platform }
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "qport",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules
            }},
            "artifacts": [{ "location": { "uri": artifact_uri } }],
            "results": results,
            "properties": { "platform": report.platform, "notes": report.notes }
        }]
    })
}
