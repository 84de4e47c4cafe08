//! The job-file parser: job bodies in YAML or JSON (`POST /api/v1/migrations`,
//! `/validations`), as `engine::config::parsed` reads them.

use proptest::prelude::*;

use crate::driver::{self, edits, mutate};

/// The shipped job files: real inputs to mutate.
const SEEDS: &[&str] = &[
    include_str!("../../config/job-cql.yaml"),
    include_str!("../../config/job-dynamodb.yaml"),
    include_str!("../../config/job-parquet.yaml"),
    include_str!("../../config/job-mysql.yaml"),
    include_str!("../../config/job-export-parquet.yaml"),
    include_str!("../../config/job-s3export-load.yaml"),
    include_str!("../../config/job-s3export-write.yaml"),
    include_str!("../../config/job-csv-load.yaml"),
    include_str!("../../config/job-csv-unload.yaml"),
];

/// A secret planted in every input: no answer may quote it.
const SECRET: &str = "Pl4nted-S3cret";

/// The longest message the API answers: `jobfile::MAX_ECHO` bytes and the size it says.
const MAX_MESSAGE: usize = drover::jobfile::MAX_ECHO + "… (18446744073709551615 bytes)".len();

/// Flow collections nested to `depth`, written as YAML or JSON would, with quotes and
/// comments between the brackets (the depth guard reads them off the raw text).
fn nesting() -> impl Strategy<Value = String> {
    (
        1usize..20_000,
        proptest::sample::select(vec![
            "[", "{", "{\"a\":", "[\"]\",", "{a: ", "['", "# [\n[", "&x [", "!t {",
        ]),
        proptest::sample::select(vec!["]", "}", "", "\"", "'", "\n"]),
    )
        .prop_map(|(depth, open, close)| {
            format!(
                "source:\n  x: {}{}",
                open.repeat(depth),
                close.repeat(depth)
            )
        })
}

/// YAML-ish token soup: every indicator the scanner has.
fn tokens() -> impl Strategy<Value = String> {
    let token = proptest::sample::select(vec![
        "[",
        "]",
        "{",
        "}",
        ":",
        ": ",
        ",",
        "- ",
        "? ",
        "\n",
        "  ",
        "\t",
        "'",
        "\"",
        "\\",
        "#",
        "&a ",
        "*a",
        "!!str ",
        "|",
        ">",
        "---\n",
        "...\n",
        "%YAML 1.2\n",
        "source",
        "target",
        "type",
        "cassandra",
        "dynamodb",
        "password",
        "host",
        "1e400",
        "-1",
        "0x10",
        "~",
        "null",
        "é",
        "\u{feff}",
        "<<: *a\n",
    ]);
    proptest::collection::vec(token, 0..400).prop_map(|t| t.concat())
}

/// Alias expansion: nested anchors of `width` references each, `levels` deep.
fn aliases() -> impl Strategy<Value = String> {
    (1usize..12, 1usize..10).prop_map(|(levels, width)| {
        let mut text = String::from("a0: &a0 [x]\n");
        for i in 1..=levels {
            let refs = vec![format!("*a{}", i - 1); width].join(", ");
            text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        text.push_str(&format!("source: *a{levels}\n"));
        text
    })
}

fn inputs() -> impl Strategy<Value = String> {
    let seeded = (proptest::sample::select(SEEDS), edits()).prop_map(|(seed, edits)| {
        let planted = seed.replace("change-me", SECRET);
        String::from_utf8_lossy(&mutate(planted.into_bytes(), &edits)).into_owned()
    });
    let json = (proptest::sample::select(SEEDS), edits()).prop_map(|(seed, edits)| {
        // The same job as JSON (JSON is YAML too), then mutated.
        let value: serde_json::Value = drover::config::yaml::from_str(seed).unwrap();
        let text = serde_json::to_string(&value)
            .unwrap()
            .replace("change-me", SECRET);
        String::from_utf8_lossy(&mutate(text.into_bytes(), &edits)).into_owned()
    });
    prop_oneof![
        6 => seeded,
        3 => json,
        2 => nesting(),
        2 => tokens(),
        1 => aliases(),
        1 => "\\PC{0,2000}",
    ]
}

fn check(text: String) -> Result<(), TestCaseError> {
    let outcome = drover::fuzzing::job_file(&text);
    if let Err(message) = &outcome {
        prop_assert!(
            message.len() <= MAX_MESSAGE,
            "a message of {} bytes",
            message.len()
        );
        if text.len() > MAX_MESSAGE {
            prop_assert!(!message.contains(text.as_str()), "the whole input echoed");
        }
        // Only the password keys hold the planted value, so no message may quote it.
        let planted_only_as_password = text.lines().filter(|l| l.contains(SECRET)).all(|l| {
            let l = l.trim_start();
            l.starts_with("password: ") || l.contains("\"password\":")
        });
        if planted_only_as_password && text.matches(SECRET).count() == 1 {
            prop_assert!(!message.contains(SECRET), "the secret is quoted: {message}");
        }
    }
    // What a job's record keeps never holds a secret, whatever the body.
    let record = drover::fuzzing::job_record(&text).to_string();
    if text
        .lines()
        .all(|l| !l.contains(SECRET) || l.trim_start().starts_with("password: "))
    {
        prop_assert!(!record.contains(SECRET), "the secret is in the record");
    }
    Ok(())
}

#[test]
fn job_file() {
    driver::run("job_file", inputs(), 300, check);
}
