//! The layer rules of docs/architecture.md, checked on the source: which module of `src/` may
//! name which. A module names only modules of lower layers (and, in the two bottom layers that
//! share their types, its own layer); no module outside `connectors/` names a connector (it
//! names the seam, `connectors::seam`, and what `connectors/mod.rs` offers).
//!
//! Today's tree breaks rules in places (issue 45 untangles them): [`DEBTS`] lists each broken
//! rule with the number of places that break it. The test fails when a rule is broken anew or
//! in more places, and also when one is broken in fewer places than listed, so that the list
//! is lowered with the fix and never hides a new break behind an old one.
//!
//! A place is a path that names a module (`crate::jobs::...` in the library, `drover::...` in
//! the binary), in a `use` or in code; comments are not read.

use std::collections::BTreeMap;
use std::path::Path;

/// The layers, highest first, with whether a module may name another of its own layer.
const LAYERS: &[(&str, bool, &[&str])] = &[
    (
        "processes",
        true,
        &["main", "cli", "client", "daemon", "fuzzing"],
    ),
    ("HTTP edge", false, &["api"]),
    ("exporters", false, &["metrics"]),
    ("job kinds", false, &["kinds"]),
    (
        "subsystems",
        false,
        &[
            "migrate",
            "validate",
            "livemigration",
            "uploads",
            "snapshots",
            "diagnostics",
        ],
    ),
    ("engine", false, &["engine"]),
    ("job framework", false, &["jobs"]),
    ("connectors", false, &["connectors"]),
    ("job format", true, &["jobfile", "savepoints"]),
    (
        "foundation",
        true,
        &[
            "cassandra",
            "s3",
            "tls",
            "auth",
            "aws",
            "fsutil",
            "telemetry",
            "answer",
            "out",
        ],
    ),
    ("daemon config", false, &["config"]),
];

/// The folders of `connectors/` that are connectors (the rest is the seam and the registry).
const CONNECTORS: &[&str] = &["cql", "dynamodb", "parquet", "mysql", "s3export", "csv"];

/// Rules broken today: (module, what it names, places). Lower a count when a fix removes
/// places; remove the line when none are left.
const DEBTS: &[(&str, &str, usize)] = &[("connectors", "engine", 4), ("connectors", "validate", 3)];

/// The module of `src/` a file belongs to (`src/jobs/kind.rs` → `jobs`, `src/kinds.rs` →
/// `kinds`); the crate roots are `main` and `lib`.
fn module_of(relative: &Path) -> String {
    let first = relative
        .components()
        .next()
        .expect("a path under src")
        .as_os_str()
        .to_string_lossy()
        .to_string();
    first.trim_end_matches(".rs").to_string()
}

/// Each path in `code` that starts with `root::` (`crate` or `drover`): its first two
/// segments, a brace group giving one path per item (`crate::{jobs, kinds::Kind}`).
fn paths(code: &str, root: &str) -> Vec<(String, Option<String>)> {
    let needle = format!("{root}::");
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(&needle) {
        // `root` must be a whole word (not `my_crate::`).
        let before = rest[..at].chars().next_back();
        rest = &rest[at + needle.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = matching_brace(group);
            for item in split_top(&group[..end]) {
                if let Some(p) = segments(item.trim()) {
                    out.push(p);
                }
            }
            rest = &group[end..];
        } else if let Some((first, second)) = segments(rest) {
            // `crate::connectors::{cql, seam::Scan}`: one path per item of the group.
            let after = &rest[first.len()..];
            match after.strip_prefix("::{") {
                Some(group) if second.is_none() => {
                    let end = matching_brace(group);
                    for item in split_top(&group[..end]) {
                        if let Some((s, _)) = segments(item.trim()) {
                            out.push((first.clone(), Some(s)));
                        }
                    }
                }
                _ => out.push((first, second)),
            }
        }
    }
    out
}

/// The byte offset of the `}` closing a group whose `{` came just before `s`.
fn matching_brace(s: &str) -> usize {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            _ => {}
        }
    }
    s.len()
}

/// The items of a brace group, split at its top-level commas.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// The first segment of a path and its second when there is one.
fn segments(s: &str) -> Option<(String, Option<String>)> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let first = ident(s);
    if first.is_empty() {
        return None;
    }
    let second = s[first.len()..]
        .strip_prefix("::")
        .map(ident)
        .filter(|s| !s.is_empty());
    Some((first, second))
}

/// What a path names, as the rules see it: `connectors::cql` for a connector, else the module.
fn target(first: &str, second: Option<&str>) -> String {
    match second {
        Some(c) if first == "connectors" && CONNECTORS.contains(&c) => format!("connectors::{c}"),
        _ => first.to_string(),
    }
}

/// The layer of a module (its index in [`LAYERS`], 0 the highest) and whether its layer's
/// modules may name each other.
fn layer(module: &str) -> Option<(usize, bool)> {
    LAYERS
        .iter()
        .position(|(_, _, modules)| modules.contains(&module))
        .map(|i| (i, LAYERS[i].1))
}

/// Whether module `from` may name `to` (a module or `connectors::<name>`).
fn allowed(from: &str, to: &str) -> bool {
    if let Some(connector) = to.strip_prefix("connectors::") {
        // A connector reuses another's writer (Parquet and MySQL load through the CQL writer).
        let _ = connector;
        return from == "connectors";
    }
    if from == to {
        return true;
    }
    match (layer(from), layer(to)) {
        (Some((f, siblings)), Some((t, _))) => f < t || (f == t && siblings),
        // A module no layer lists is a failure of its own (below), not a broken rule.
        _ => true,
    }
}

/// A line without its `//` comment: from the first `//` outside a string literal (a URL in
/// a string is code).
fn without_comment(line: &str) -> &str {
    let mut in_string = false;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '"' if previous != '\\' => in_string = !in_string,
            '/' if previous == '/' && !in_string => return &line[..i - 1],
            _ => {}
        }
        previous = c;
    }
    line
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_names_only_what_its_layer_may() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut unlisted = Vec::new();
    // (from, to) → places, with the first file of each for the message.
    let mut broken: BTreeMap<(String, String), (usize, String)> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src");
        let from = module_of(relative);
        if from != "lib" && layer(&from).is_none() {
            unlisted.push(from.clone());
        }
        let text = std::fs::read_to_string(file).expect("read a source file");
        let code: String = text
            .lines()
            .map(without_comment)
            .collect::<Vec<_>>()
            .join("\n");
        let root = if from == "main" { "drover" } else { "crate" };
        for (first, second) in paths(&code, root) {
            let to = target(&first, second.as_deref());
            if from == "lib" || allowed(&from, &to) {
                continue;
            }
            let entry = broken
                .entry((from.clone(), to))
                .or_insert((0, relative.display().to_string()));
            entry.0 += 1;
        }
    }
    unlisted.sort();
    unlisted.dedup();
    assert!(
        unlisted.is_empty(),
        "modules of src/ in no layer of tests/layers.rs (place them, and in docs/architecture.md): {unlisted:?}"
    );
    let debts: BTreeMap<(String, String), usize> = DEBTS
        .iter()
        .map(|(f, t, n)| ((f.to_string(), t.to_string()), *n))
        .collect();
    let mut problems = Vec::new();
    for ((from, to), (places, first)) in &broken {
        match debts.get(&(from.clone(), to.clone())) {
            None => problems.push(format!(
                "{from} names {to} in {places} place(s), first in src/{first}: a module may name only lower layers"
            )),
            Some(&listed) if *places > listed => problems.push(format!(
                "{from} names {to} in {places} places, {listed} listed in DEBTS (first in src/{first}): a new place breaks the rule"
            )),
            Some(&listed) if *places < listed => problems.push(format!(
                "{from} names {to} in {places} places, {listed} listed in DEBTS: lower the count"
            )),
            Some(_) => {}
        }
    }
    for (from, to) in debts.keys() {
        if !broken.contains_key(&(from.clone(), to.clone())) {
            problems.push(format!(
                "{from} no longer names {to}: remove its line from DEBTS"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn paths_are_read_from_uses_groups_and_code() {
    let code = "use crate::{jobs::{Kind, Job}, kinds};\nuse crate::connectors::{seam::Scan, mysql};\nlet x = crate::connectors::cql::Session::new();\nmy_crate::no::x;\n";
    let got: Vec<String> = paths(code, "crate")
        .iter()
        .map(|(f, s)| target(f, s.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            "jobs",
            "kinds",
            "connectors",
            "connectors::mysql",
            "connectors::cql"
        ]
    );
    assert_eq!(
        without_comment(r#"let u = "http://x"; // crate::kinds"#),
        r#"let u = "http://x"; "#
    );
    assert_eq!(without_comment("/// crate::jobs"), "");
    assert!(allowed("api", "jobs"));
    assert!(!allowed("jobs", "migrate"));
    assert!(!allowed("migrate", "connectors::cql"));
    assert!(allowed("migrate", "connectors"));
    assert!(allowed("connectors", "connectors::cql"));
    assert!(!allowed("config", "auth"));
    assert!(allowed("tls", "auth"));
}
