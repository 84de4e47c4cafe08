//! The batch frame reader of a destination (`POST /api/v1/live-migration/files-batch`, a
//! drover source's extension): length-prefixed JSON frame headers and file content.

use drover::livemigration::batch::{Frame, MAX_BATCH_FILE_BYTES, SkipReason, encode};
use proptest::prelude::*;

use crate::driver::{self, edits, mutate};

const MAX_MESSAGE_CHARS: usize = drover::answer::ERROR_MESSAGE_CHARS + 100;

fn frame() -> impl Strategy<Value = (Frame, Vec<u8>)> {
    prop_oneof![
        (
            "\\PC{0,40}",
            proptest::collection::vec(any::<u8>(), 0..200),
            any::<u64>(),
            any::<u32>(),
            "[0-9a-f]{16}"
        )
            .prop_map(|(file_url, content, last_modified_time, mode, digest)| {
                (
                    Frame::File {
                        file_url,
                        size: content.len() as u64,
                        last_modified_time,
                        mode,
                        digest,
                    },
                    content,
                )
            }),
        (
            "\\PC{0,40}",
            "\\PC{0,2000}",
            proptest::sample::select(vec![
                SkipReason::NotFound,
                SkipReason::TooLarge,
                SkipReason::Refused,
                SkipReason::Unreadable
            ])
        )
            .prop_map(|(file_url, message, reason)| (
                Frame::Skipped {
                    file_url,
                    reason,
                    message
                },
                Vec::new()
            )),
    ]
}

/// Frames with their content, whether the encoded body is mutated, the edits, the size of
/// the pieces it arrives in.
type Case = (
    Vec<(Frame, Vec<u8>)>,
    bool,
    Vec<(usize, u8, Vec<u8>)>,
    usize,
);

fn bodies() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(frame(), 0..8),
        any::<bool>(),
        edits(),
        1usize..300,
    )
}

#[test]
fn frames() {
    driver::run(
        "frames",
        bodies(),
        120,
        |(frames, mutated, edits, chunk)| {
            let mut body = Vec::new();
            for (f, content) in &frames {
                encode(f, content, &mut body);
            }
            encode(
                &Frame::End {
                    files: frames.len(),
                },
                &[],
                &mut body,
            );
            let body = if mutated { mutate(body, &edits) } else { body };
            match drover::fuzzing::frames(&body, chunk) {
                Ok(read) => {
                    prop_assert!(
                        matches!(read.last(), Some((Frame::End { .. }, 0))),
                        "no end frame"
                    );
                    for (f, len) in &read {
                        prop_assert!(*len as u64 <= MAX_BATCH_FILE_BYTES);
                        if let Frame::File { size, .. } = f {
                            prop_assert_eq!(*size, *len as u64);
                        }
                    }
                    if !mutated {
                        // Round trip: what a source encodes reads back as itself.
                        let want: Vec<(Frame, usize)> =
                            frames.iter().map(|(f, c)| (f.clone(), c.len())).collect();
                        prop_assert_eq!(&read[..read.len() - 1], &want[..]);
                    }
                }
                Err(message) => {
                    let chars = message.chars().count();
                    prop_assert!(
                        chars <= MAX_MESSAGE_CHARS,
                        "a message of {chars} characters"
                    );
                }
            }
            Ok(())
        },
    );
}
