//! The digest reader of a destination: a source's answer to `?digestAlgorithm=` (verification
//! tasks compare it with the local file's), and to `?blockSize=` (block digests).

use drover::livemigration::batch::{self, BlockDigests};
use drover::livemigration::digest::{Algorithm, well_formed};
use proptest::prelude::*;

use crate::driver::{self, edits, mutate};

const ALGORITHMS: [Algorithm; 4] = [
    Algorithm::Sha256,
    Algorithm::Xxh3,
    Algorithm::Md5,
    Algorithm::Xxhash32,
];

/// The longest message of a refused answer (it never quotes the answer).
const MAX_MESSAGE_CHARS: usize = drover::answer::ERROR_MESSAGE_CHARS + 100;

fn digest_of(algorithm: Algorithm, data: &[u8]) -> String {
    let mut h = algorithm.hasher();
    h.update(data);
    h.finish()
}

fn bodies() -> impl Strategy<Value = (Vec<u8>, Algorithm)> {
    let algorithm = proptest::sample::select(ALGORITHMS.to_vec());
    let value = prop_oneof![
        "[0-9a-fA-F]{0,70}".prop_map(serde_json::Value::from),
        "[A-Za-z0-9+/=]{0,30}".prop_map(serde_json::Value::from),
        "\\PC{0,600}".prop_map(serde_json::Value::from),
        Just(serde_json::Value::Null),
        any::<u64>().prop_map(serde_json::Value::from),
        Just(serde_json::json!(["a"])),
        (600usize..4000).prop_map(|n| serde_json::Value::from("A".repeat(n))),
    ];
    let answer = (
        proptest::collection::vec(any::<u8>(), 0..64),
        algorithm.clone(),
        value,
        any::<u8>(),
        edits(),
    )
        .prop_map(|(data, algorithm, value, how, edits)| {
            let mut body = match how % 4 {
                // What a source writes, of some data: accepted as it is.
                0 => drover::fuzzing::write_digest_answer(&digest_of(algorithm, &data), algorithm),
                // Another algorithm's digest.
                1 => drover::fuzzing::write_digest_answer(
                    &digest_of(ALGORITHMS[how as usize % 4], &data),
                    algorithm,
                ),
                _ => serde_json::to_vec(
                    &serde_json::json!({"digest": value, "digestAlgorithm": algorithm.name()}),
                )
                .unwrap(),
            };
            if how % 3 == 0 {
                body = mutate(body, &edits);
            }
            (body, algorithm)
        });
    prop_oneof![
        6 => answer,
        1 => (proptest::collection::vec(any::<u8>(), 0..4096), algorithm),
    ]
}

fn check((body, algorithm): (Vec<u8>, Algorithm)) -> Result<(), TestCaseError> {
    match drover::fuzzing::digest_answer(&body, algorithm) {
        Ok(digest) => {
            prop_assert!(
                well_formed(algorithm, &digest),
                "{digest:?} taken as a {} digest",
                algorithm.name()
            );
            prop_assert!(digest.len() <= 64);
        }
        Err(message) => {
            let chars = message.chars().count();
            prop_assert!(
                chars <= MAX_MESSAGE_CHARS,
                "a message of {chars} characters"
            );
            let text = String::from_utf8_lossy(&body);
            if text.len() > 8 {
                prop_assert!(
                    !message.contains(text.as_ref()),
                    "the answer echoed: {message}"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn digest() {
    driver::run("digest", bodies(), 500, check);
}

/// A digest a source writes, of any data, reads back as itself.
#[test]
fn digest_round_trip() {
    let inputs = (
        proptest::collection::vec(any::<u8>(), 0..3000),
        proptest::sample::select(ALGORITHMS.to_vec()),
    );
    driver::run("digest_round_trip", inputs, 300, |(data, algorithm)| {
        let digest = digest_of(algorithm, &data);
        prop_assert!(well_formed(algorithm, &digest), "{digest:?}");
        let body = drover::fuzzing::write_digest_answer(&digest, algorithm);
        prop_assert_eq!(drover::fuzzing::digest_answer(&body, algorithm), Ok(digest));
        Ok(())
    });
}

/// Block-digest answers against a local file's: no panic whatever the sizes, one verdict per
/// listed block, a clipped error.
#[test]
fn block_digests() {
    let theirs = (
        "[0-9a-f]{0,20}",
        prop_oneof![Just(1u64 << 20), any::<u64>(), Just(0u64), Just(u64::MAX)],
        prop_oneof![0u64..(8 << 20), any::<u64>()],
        proptest::collection::vec(prop_oneof!["[0-9a-f]{16}", "\\PC{0,20}"], 0..40),
        edits(),
        any::<bool>(),
    )
        .prop_map(|(digest, block_size, size, blocks, edits, mutated)| {
            let body = serde_json::to_vec(&BlockDigests {
                digest,
                digest_algorithm: "xxh3".into(),
                block_size,
                size,
                blocks,
            })
            .unwrap();
            if mutated { mutate(body, &edits) } else { body }
        });
    let inputs = (
        theirs,
        proptest::collection::vec(any::<u8>(), 0..3000),
        prop_oneof![Just(1u64 << 20), Just(64u64), 1u64..5000],
    );
    driver::run("block_digests", inputs, 300, |(body, data, block)| {
        let mine = batch::block_digests(&data[..], Algorithm::Xxh3, block).unwrap();
        match drover::fuzzing::block_digest_answer(&body, &mine) {
            Ok(verdicts) => {
                let theirs: BlockDigests = serde_json::from_slice(&body).unwrap();
                prop_assert_eq!(verdicts.len(), theirs.blocks.len());
            }
            Err(message) => prop_assert!(message.chars().count() <= MAX_MESSAGE_CHARS),
        }
        Ok(())
    });
}
