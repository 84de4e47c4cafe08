//! Inputs the fuzzing pass of issue 42 found refused or mishandled, each with the figures of
//! the case. They fail on the code before the fix.

use drover::answer::ERROR_MESSAGE_CHARS;
use drover::livemigration::digest::Algorithm;
use drover::livemigration::files::DirType;
use drover::livemigration::local::{MAX_NAME_BYTES, MAX_PATH_BYTES, local_key};

/// A listing entry whose URL is 1 MB long and not a file URL: the task's error (kept in its
/// record and logged) quoted the whole URL, 1,000,040 characters; now at most 513.
#[test]
fn a_listed_url_of_a_megabyte_is_not_quoted_whole() {
    let url = format!("/elsewhere/{}", "a".repeat(1_000_000));
    let body = serde_json::to_vec(&serde_json::json!({"files": [
        {"fileUrl": url, "size": 1, "fileType": "FILE", "lastModifiedTime": 1}
    ]}))
    .unwrap();
    let message = drover::fuzzing::listing(&body, 10).unwrap_err();
    assert!(
        message.starts_with("source unexpected file URL \"/elsewhere/aaaa"),
        "{}",
        &message[..80]
    );
    assert!(
        message.chars().count() <= ERROR_MESSAGE_CHARS + 8,
        "{} characters",
        message.chars().count()
    );
    // A URL with `..` deep in a long path: refused, and clipped too.
    let url = format!(
        "/api/v1/live-migration/files/data/0/{}/../x",
        "b/".repeat(100_000)
    );
    let body = serde_json::to_vec(&serde_json::json!({"files": [
        {"fileUrl": url, "size": 1, "fileType": "FILE", "lastModifiedTime": 1}
    ]}))
    .unwrap();
    let message = drover::fuzzing::listing(&body, 10).unwrap_err();
    assert!(
        message.chars().count() <= ERROR_MESSAGE_CHARS + 8,
        "{} characters",
        message.chars().count()
    );
}

/// A digest answer of 4,000 characters that are no digest was taken as the source's digest,
/// and quoted whole in the verification report as "digest AAAA… at the source"; now refused
/// without quoting it.
#[test]
fn a_digest_answer_that_is_no_digest_is_refused() {
    let body = serde_json::to_vec(&serde_json::json!({"digest": "A".repeat(4000)})).unwrap();
    assert!(body.len() <= drover::livemigration::peer::DIGEST_ANSWER_READ as usize);
    for algorithm in [
        Algorithm::Sha256,
        Algorithm::Xxh3,
        Algorithm::Md5,
        Algorithm::Xxhash32,
    ] {
        let e = drover::fuzzing::digest_answer(&body, algorithm).unwrap_err();
        assert_eq!(
            e,
            format!(
                "the answer's digest (4000 characters) is not a {} digest",
                algorithm.name()
            )
        );
    }
    // Near misses of each form.
    for (algorithm, digest) in [
        (
            Algorithm::Sha256,
            "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
        ),
        (Algorithm::Xxh3, "78af5f94892f395"),
        (Algorithm::Md5, "kAFQmDzST7DWlj99KOF/cg="),
        (Algorithm::Md5, "kAFQmDzST7DWlj99KOF/ch=="),
        (Algorithm::Xxhash32, "032d153ff"),
        (Algorithm::Xxhash32, "0286208"),
    ] {
        let body = drover::fuzzing::write_digest_answer(digest, algorithm);
        assert!(
            drover::fuzzing::digest_answer(&body, algorithm).is_err(),
            "{digest:?}"
        );
    }
    // And the real ones (the values of the digest module's tests).
    for (algorithm, digest) in [
        (
            Algorithm::Sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ),
        (Algorithm::Xxh3, "78af5f94892f3950"),
        (Algorithm::Md5, "kAFQmDzST7DWlj99KOF/cg=="),
        (Algorithm::Xxhash32, "286208"),
        (Algorithm::Xxhash32, "0"),
    ] {
        let body = drover::fuzzing::write_digest_answer(digest, algorithm);
        assert_eq!(
            drover::fuzzing::digest_answer(&body, algorithm),
            Ok(digest.to_string())
        );
    }
}

/// A batch frame header naming an unknown frame of 60,000 characters: serde's message quoted
/// it whole in the task's error (over 60,000 characters); now clipped.
#[test]
fn a_frame_header_is_not_quoted_whole() {
    let header = serde_json::to_vec(&serde_json::json!({"frame": "x".repeat(60_000)})).unwrap();
    let mut body = (header.len() as u32).to_be_bytes().to_vec();
    body.extend_from_slice(&header);
    let message = drover::fuzzing::frames(&body, 4096).unwrap_err();
    assert!(
        message.contains("batch: not a frame header: unknown variant `xxx"),
        "{}",
        &message[..100]
    );
    assert!(
        message.chars().count() <= ERROR_MESSAGE_CHARS + 40,
        "{} characters",
        message.chars().count()
    );
}

/// A verification report quotes the source's URLs: a listed URL of 100,036 characters made a
/// difference of 100,060 characters, up to 100 of them per report; each is now clipped.
#[test]
fn a_verification_report_clips_what_it_quotes() {
    use drover::livemigration::peer::RemoteFile;
    let theirs = RemoteFile {
        file_url: format!(
            "/api/v1/live-migration/files/data/0/{}",
            "c".repeat(100_000)
        ),
        size: 1,
        file_type: "FILE".into(),
        last_modified_time: 1,
        mode: None,
    };
    let mut report = drover::livemigration::verify::VerifyReport::default();
    drover::livemigration::verify::compare(&[], &[theirs], &mut report);
    assert_eq!(report.differences.len(), 1);
    assert_eq!(
        report.differences[0].chars().count(),
        ERROR_MESSAGE_CHARS + 1
    );
}

/// The fuzzer's minimal listing (`bench/results/2026-12-06-fuzz.txt`): an entry at
/// `data/+1/a` was taken as `data/1/a`, so two entries of one listing (`+1`, `01`, `1`) could
/// name one local file. Only the index as drover and Sidecar write it is taken now.
#[test]
fn a_directory_index_is_taken_only_as_written_by_a_source() {
    let body = br#"{"totalSize":1,"files":[{"fileUrl":"/api/v1/live-migration/files/data/+1/a","size":0,"fileType":"FILE","lastModifiedTime":0,"extra":[1,{"a":"b"}]}]}"#;
    let e = drover::fuzzing::listing(body, 1_000_000).unwrap_err();
    assert_eq!(
        e,
        r#"source bad directory index in "/api/v1/live-migration/files/data/+1/a""#
    );
    for index in ["01", "-0", " 1", "1 "] {
        let url = format!("/api/v1/live-migration/files/data/{index}/ks/t/a");
        assert!(local_key(&url).is_err(), "{url}");
    }
    assert_eq!(
        local_key("/api/v1/live-migration/files/data/10/ks/t/a").unwrap(),
        (DirType::Data, 10, "ks/t/a".to_string())
    );
}

/// A listed name longer than a Linux file name (255 bytes) or a path longer than `PATH_MAX`
/// (4096) names no file a source can hold, and every later error about it would quote it:
/// refused at 256 and 4096 bytes, taken at 255 and 4095.
#[test]
fn listed_names_and_paths_are_no_longer_than_a_file_system_holds() {
    let at = |path: &str| local_key(&format!("/api/v1/live-migration/files/data/0/{path}"));
    let name = "n".repeat(MAX_NAME_BYTES);
    assert!(at(&name).is_ok());
    let e = at(&format!("{name}n")).unwrap_err().to_string();
    assert!(
        e.starts_with("source a path longer than 4096 bytes, or with a name longer than 255"),
        "{e}"
    );
    let path = vec![name.as_str(); 16].join("/");
    assert_eq!(path.len(), MAX_PATH_BYTES - 1);
    assert!(at(&path).is_ok());
    assert!(at(&format!("{path}/m")).is_err());
}
