//! The listing reader of a destination: a source's `GET /api/v1/live-migration/files` body,
//! read into entries, each mapped to its place under one of the node's directories (what a
//! data-copy task's plan does with every entry before it writes anything).

use std::path::{Component, Path};

use drover::answer::ERROR_MESSAGE_CHARS;
use drover::livemigration::files::{DirType, Entry, PART_SUFFIX, URL_PREFIX};
use drover::livemigration::local::{MAX_NAME_BYTES, MAX_PATH_BYTES};
use proptest::prelude::*;

use crate::driver::{self, edits, mutate};

/// The longest message a refused listing gives: a clipped part and the words around it.
const MAX_MESSAGE_CHARS: usize = ERROR_MESSAGE_CHARS + 100;

/// Path segments, hostile ones among them.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z0-9_-]{1,12}",
        1 => proptest::sample::select(vec![
            "..", ".", "", "a\0b", "\0", "x.drover-part", "/", "//", "\\..", "..\\..", "%2e%2e",
            "%2F", "a?b", "a#b", "é", "\u{202e}", "C:", "~", " ", "..."
        ])
        .prop_map(String::from),
        1 => "\\PC{1,8}",
    ]
}

fn file_url() -> impl Strategy<Value = String> {
    let dir_type = prop_oneof![
        4 => proptest::sample::select(DirType::ALL.to_vec()).prop_map(|t| t.name().to_string()),
        1 => proptest::sample::select(vec!["", "tmp", "..", "DATA", "data/..", "snapshots"]).prop_map(String::from),
    ];
    let index = prop_oneof![
        4 => (0usize..3).prop_map(|i| i.to_string()),
        1 => proptest::sample::select(vec!["", "-1", "+1", "01", "18446744073709551616", "0x1", " 0", "1.0"]).prop_map(String::from),
    ];
    let prefix = prop_oneof![
        8 => Just(URL_PREFIX.to_string()),
        1 => proptest::sample::select(vec!["", "/", "/api/v1/live-migration/files", "http://elsewhere/api/v1/live-migration/files/", "/api/v1/live-migration/files//"]).prop_map(String::from),
    ];
    (
        prefix,
        dir_type,
        index,
        proptest::collection::vec(segment(), 0..6),
        any::<bool>(),
    )
        .prop_map(|(prefix, t, i, segments, slash)| {
            let mut url = format!("{prefix}{t}/{i}/{}", segments.join("/"));
            if slash {
                url.push('/');
            }
            url
        })
}

fn size() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        4 => (0u64..1 << 40).prop_map(serde_json::Value::from),
        1 => proptest::sample::select(vec![
            serde_json::json!(-1), serde_json::json!(-5), serde_json::json!(u64::MAX),
            serde_json::json!(1.5), serde_json::json!("3"), serde_json::json!(null),
            serde_json::json!(i64::MIN), serde_json::json!(1e300)
        ]),
    ]
}

/// Entries as a source (or anything answering in its place) may list them.
fn entry() -> impl Strategy<Value = serde_json::Value> {
    (
        file_url(),
        size(),
        prop_oneof![4 => Just("FILE"), 2 => Just("DIRECTORY"), 1 => Just("LINK"), 1 => Just("file")],
        any::<u64>(),
        proptest::option::of(any::<u32>()),
        any::<u8>(),
    )
        .prop_map(|(url, size, kind, modified, mode, drop)| {
            let mut e = serde_json::json!({"fileUrl": url, "size": size, "fileType": kind, "lastModifiedTime": modified});
            if let Some(mode) = mode {
                e["mode"] = mode.into();
            }
            // Now and then a field missing or one more.
            match drop % 16 {
                0 => {
                    e.as_object_mut().unwrap().remove("size");
                }
                1 => e["extra"] = serde_json::json!([1, {"a": "b"}]),
                _ => {}
            }
            e
        })
}

fn bodies() -> impl Strategy<Value = (Vec<u8>, usize)> {
    let listing = (proptest::collection::vec(entry(), 0..12), edits(), 0u8..4).prop_map(
        |(files, edits, how)| {
            let body =
                serde_json::to_vec(&serde_json::json!({"totalSize": 1, "files": files})).unwrap();
            // Most bodies well formed, so that entries reach the mapping; some mutated.
            if how == 0 { mutate(body, &edits) } else { body }
        },
    );
    let body = prop_oneof![
        8 => listing,
        1 => proptest::collection::vec(any::<u8>(), 0..2000),
        1 => "\\PC{0,400}".prop_map(String::into_bytes),
    ];
    (body, prop_oneof![Just(1_000_000usize), 0usize..8])
}

/// What the reader promises of an accepted entry's place: a plain relative path below its
/// directory, that no download in progress of the destination's own can take.
fn safe(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\0')
        && !path.starts_with('/')
        && !path.ends_with(PART_SUFFIX)
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
        && Path::new(path)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        && path.len() < MAX_PATH_BYTES
        && path.split('/').all(|s| s.len() <= MAX_NAME_BYTES)
}

fn check((body, max_files): (Vec<u8>, usize)) -> Result<(), TestCaseError> {
    match drover::fuzzing::listing(&body, max_files) {
        Ok(entries) => {
            prop_assert!(entries.len() <= max_files);
            for (f, t, i, p) in entries {
                prop_assert!(safe(&p), "{:?} taken as {p:?}", f.file_url);
                prop_assert_eq!(&f.file_url, &format!("{URL_PREFIX}{}/{i}/{p}", t.name()));
            }
        }
        Err(message) => {
            let chars = message.chars().count();
            prop_assert!(
                chars <= MAX_MESSAGE_CHARS,
                "a message of {chars} characters: {message}"
            );
            if body.len() > MAX_MESSAGE_CHARS {
                prop_assert!(
                    !message
                        .as_bytes()
                        .windows(body.len())
                        .any(|w| w == body.as_slice())
                );
            }
        }
    }
    Ok(())
}

#[test]
fn listing() {
    driver::run("listing", bodies(), 300, check);
}

/// A URL past any clip, refused: the message keeps its bound (a 1 MB URL once came back whole
/// in the task's error).
fn long_urls() -> impl Strategy<Value = (Vec<u8>, usize)> {
    (file_url(), 600usize..200_000, proptest::sample::select(vec!["a", "/", "..", "\0", "é"]))
        .prop_map(|(url, n, piece)| {
            let url = format!("{url}{}", piece.repeat(n / piece.len().max(1)));
            let body = serde_json::to_vec(&serde_json::json!({"files": [{"fileUrl": url, "size": 1, "fileType": "FILE", "lastModifiedTime": 1}]})).unwrap();
            (body, 10)
        })
}

#[test]
fn listing_long_urls() {
    driver::run("listing_long_urls", long_urls(), 30, check);
}

/// Entries a source can list: paths of plain segments (any characters but `/` and NUL).
fn entries() -> impl Strategy<Value = Vec<Entry>> {
    let name = prop_oneof![
        3 => "[a-zA-Z0-9_.-]{1,16}",
        1 => "[^/\0]{1,8}",
    ]
    .prop_filter("a plain segment", |s| {
        s != "." && s != ".." && !s.ends_with(PART_SUFFIX)
    });
    let e = (
        proptest::sample::select(DirType::ALL.to_vec()),
        0usize..4,
        proptest::collection::vec(name, 1..5),
        0u64..=i64::MAX as u64,
        any::<bool>(),
        any::<u64>(),
        0u32..0o7777,
    )
        .prop_map(
            |(dir_type, dir_index, segments, size, is_dir, modified_ms, mode)| Entry {
                dir_type,
                dir_index,
                path: segments.join("/"),
                size: if is_dir { 0 } else { size },
                is_dir,
                modified_ms,
                mode,
            },
        );
    proptest::collection::vec(e, 0..20)
}

/// A listing a source writes reads back as the same entries, each at its own place.
#[test]
fn listing_round_trip() {
    driver::run("listing_round_trip", entries(), 200, |entries| {
        let body = drover::fuzzing::write_listing(&entries);
        let read = drover::fuzzing::listing(&body, entries.len()).map_err(TestCaseError::fail)?;
        prop_assert_eq!(read.len(), entries.len());
        for (e, (f, t, i, p)) in entries.iter().zip(read) {
            prop_assert_eq!((e.dir_type, e.dir_index, &e.path), (t, i, &p));
            prop_assert_eq!(
                (e.size, e.is_dir, e.modified_ms, Some(e.mode)),
                (f.size, f.is_dir(), f.last_modified_time, f.mode)
            );
            prop_assert_eq!(f.is_file(), !e.is_dir);
        }
        Ok(())
    });
}
