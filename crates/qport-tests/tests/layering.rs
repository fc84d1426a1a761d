//! The README's crate map is the law: every qport crate's declared
//! dependencies on other qport crates (from `cargo metadata`) must be
//! allowed by the README's "Allowed dependencies" table, must be used by the
//! crate's code, and the table itself must point one way (no cycles).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `crate -> allowed qport crates`, from the README table rows
/// `| qport-x | a, b, c |` (short names like `core` mean `qport-core`).
fn readme_table() -> BTreeMap<String, BTreeSet<String>> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme
        .find("| crate | may depend on |")
        .expect("README has the 'Allowed dependencies' table");
    let mut table = BTreeMap::new();
    for line in readme[start..].lines().skip(2) {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        if !line.starts_with('|') || cells.len() != 2 {
            break;
        }
        let name = cells[0].split_whitespace().next().unwrap().to_string();
        let allowed = cells[1]
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "—")
            .map(|s| format!("qport-{s}"))
            .collect();
        table.insert(name, allowed);
    }
    table
}

/// `crate -> (manifest dir, declared qport dependencies of kind normal)`.
fn workspace_deps() -> BTreeMap<String, (PathBuf, BTreeSet<String>)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = qport_tests::output_ok(
        Command::new(cargo)
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .current_dir(repo_root()),
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut map = BTreeMap::new();
    for pkg in meta["packages"].as_array().unwrap() {
        let name = pkg["name"].as_str().unwrap();
        if !name.starts_with("qport-") {
            continue;
        }
        let dir = Path::new(pkg["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap()
            .to_path_buf();
        let deps = pkg["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null()) // normal dependencies, not dev/build
            .filter_map(|d| d["name"].as_str())
            .filter(|n| n.starts_with("qport-"))
            .map(String::from)
            .collect();
        map.insert(name.to_string(), (dir, deps));
    }
    map
}

/// Whether any `.rs` file under `dir` names the crate `ident`.
fn uses(dir: &Path, ident: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let p = e.path();
        if p.is_dir() {
            uses(&p, ident)
        } else {
            p.extension().is_some_and(|x| x == "rs")
                && std::fs::read_to_string(&p).is_ok_and(|s| s.contains(ident))
        }
    })
}

#[test]
fn declared_dependencies_follow_the_readme_table() {
    let table = readme_table();
    let deps = workspace_deps();
    let mut problems = Vec::new();
    for (name, (dir, declared)) in &deps {
        let Some(allowed) = table.get(name) else {
            problems.push(format!("{name} has no row in the README table"));
            continue;
        };
        for d in declared {
            if !allowed.contains(d) {
                problems.push(format!(
                    "{name} depends on {d}, which its README row does not allow"
                ));
            }
            let ident = d.replace('-', "_");
            let used = ["src", "tests", "examples", "benches"]
                .iter()
                .any(|sub| uses(&dir.join(sub), &ident));
            if !used {
                problems.push(format!(
                    "{name} declares {d} but its code never uses `{ident}`"
                ));
            }
        }
    }
    for name in table.keys() {
        if !deps.contains_key(name) {
            problems.push(format!(
                "the README table lists {name}, which is not a workspace crate"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readme_table_points_one_way() {
    let table = readme_table();
    // Depth-first search for a cycle through the allowed edges.
    fn visit(
        n: &str,
        table: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(n) {
            return;
        }
        assert!(
            !path.iter().any(|p| p == n),
            "cycle: {} -> {n}",
            path.join(" -> ")
        );
        path.push(n.to_string());
        for next in table.get(n).into_iter().flatten() {
            visit(next, table, path, done);
        }
        path.pop();
        done.insert(n.to_string());
    }
    let mut done = BTreeSet::new();
    for n in table.keys() {
        visit(n, &table, &mut Vec::new(), &mut done);
    }
    assert!(table.len() >= 10, "the table has only {} rows", table.len());
}
