use super::*;

fn uploads(dir: &Path, max: u64) -> Uploads {
    let config = SstableUploadsConfig {
        enabled: true,
        min_free_space_percent: 0.0,
        max_component_size: bytesize::ByteSize::b(max),
        ..Default::default()
    };
    Uploads::new(&config, dir, None).unwrap()
}

fn body(parts: &[&'static [u8]]) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
    futures::stream::iter(
        parts
            .iter()
            .map(|p| Ok(Bytes::from_static(p)))
            .collect::<Vec<_>>(),
    )
}

const ID: &str = "0190c0de-7d3e-7cbe-8a7c-0123456789ab";

#[tokio::test]
async fn a_component_lands_whole_with_its_digest_checked_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let up = uploads(dir.path(), 1 << 20);
    let names = (ID, "ks", "t", "nb-1-big-Data.db");
    let data: &[&'static [u8]] = &[b"hello ", b"sstable"];
    let xx = format!("{:x}", xxhash_rust::xxh32::xxh32(b"hello sstable", 7));
    let ok = Expected::from_headers(Some(&xx), Some("7"), None).unwrap();
    let got = up.upload(names, ok, None, body(data)).await.unwrap();
    assert_eq!(got.size, 13);
    // Zero-padded, as xxh32sum prints it.
    let padded = Expected::from_headers(Some(&format!("0000000{xx}")), Some("7"), None).unwrap();
    up.upload(names, padded, None, body(data)).await.unwrap();
    let path = dir
        .path()
        .join("sstable-uploads")
        .join(ID)
        .join("ks/t/nb-1-big-Data.db");
    assert_eq!(std::fs::read(&path).unwrap(), b"hello sstable");

    // A wrong digest leaves nothing: neither the final name nor a temporary file.
    let names2 = (ID, "ks", "t", "nb-1-big-Index.db");
    let bad = Expected::from_headers(Some("deadbeef"), None, None).unwrap();
    let err = up.upload(names2, bad, None, body(data)).await.unwrap_err();
    assert!(
        matches!(
            err,
            UploadError::DigestMismatch {
                algorithm: "XXHash32",
                ..
            }
        ),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, vec!["nb-1-big-Data.db".to_string()]);

    // MD5 as base64.
    use base64::Engine as _;
    let md5 = base64::engine::general_purpose::STANDARD
        .encode(<md5::Md5 as md5::Digest>::digest(b"hello sstable"));
    up.upload(names2, Expected::Md5(md5), None, body(data))
        .await
        .unwrap();
    let err = up
        .upload(names2, Expected::Md5("AAAA".into()), None, body(data))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        UploadError::DigestMismatch {
            algorithm: "MD5",
            ..
        }
    ));

    // Too long a body is cut off.
    let small = uploads(dir.path(), 4);
    let err = small
        .upload(names2, Expected::None, None, body(data))
        .await
        .unwrap_err();
    assert!(
        matches!(err, UploadError::TooLarge { limit: 4, .. }),
        "{err}"
    );

    // A bad seed is a bad request, not a panic.
    assert!(matches!(
        Expected::from_headers(Some("1"), Some("zz"), None),
        Err(UploadError::Invalid(_))
    ));

    up.delete(ID).await.unwrap();
    assert!(!dir.path().join("sstable-uploads").join(ID).exists());
    assert!(matches!(up.delete(ID).await, Err(UploadError::NotFound(_))));
}

#[tokio::test]
async fn names_and_limits_are_checked_before_any_byte_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let up = uploads(dir.path(), 1 << 20);
    for names in [
        ("nope", "ks", "t", "nb-1-big-Data.db"),
        (ID, "system", "t", "nb-1-big-Data.db"),
        (ID, "ks", "t", "../../x-Data.db"),
        (ID, "ks/..", "t", "nb-1-big-Data.db"),
    ] {
        assert!(
            up.upload(names, Expected::None, None, body(&[b"x"]))
                .await
                .is_err(),
            "{names:?}"
        );
    }
    let staged: Vec<_> = std::fs::read_dir(dir.path().join("sstable-uploads"))
        .unwrap()
        .collect();
    assert!(staged.is_empty());
    assert!(matches!(
        up.import((ID, "ks", "t"), ImportOptions::default()),
        Err(UploadError::NotFound(_))
    ));
    let off = Uploads::new(&SstableUploadsConfig::default(), dir.path(), None).unwrap();
    assert!(matches!(
        off.upload(
            (ID, "ks", "t", "nb-1-big-Data.db"),
            Expected::None,
            None,
            body(&[b"x"])
        )
        .await,
        Err(UploadError::Disabled)
    ));
}

#[tokio::test]
async fn an_import_runs_nodetool_once_and_is_remembered_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    // A stand-in for nodetool that records its arguments: the real one is exercised by the
    // integration tests against the test Cassandra.
    let script = dir.path().join("nodetool");
    let calls = dir.path().join("calls");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho \"$@\" >> {}\nexit 0\n", calls.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = SstableUploadsConfig {
        enabled: true,
        min_free_space_percent: 0.0,
        importer: crate::config::ImporterKind::Nodetool,
        nodetool: script.clone(),
        ..Default::default()
    };
    let up = Uploads::new(&config, dir.path(), Some("127.0.0.1:7299".into())).unwrap();
    up.upload(
        (ID, "ks", "t", "nb-1-big-Data.db"),
        Expected::None,
        None,
        body(&[b"x"]),
    )
    .await
    .unwrap();
    let options = ImportOptions {
        verify_tokens: false,
        ..Default::default()
    };
    let mut status = up.import((ID, "ks", "t"), options).unwrap();
    for _ in 0..100 {
        if status != ImportStatus::Pending {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        status = up.import((ID, "ks", "t"), options).unwrap();
    }
    assert_eq!(status, ImportStatus::Done);
    let said = std::fs::read_to_string(&calls).unwrap();
    let staged = dir.path().join("sstable-uploads").join(ID);
    assert_eq!(
        said.trim(),
        format!(
            "-h 127.0.0.1 -p 7299 import --no-tokens --extended-verify -- ks t {}",
            staged.join("ks/t").display()
        )
    );
    assert!(
        !staged.exists(),
        "the upload's directory goes once imported"
    );
    // A new daemon on the same state knows: no second import, no second upload.
    let again = Uploads::new(&config, dir.path(), None).unwrap();
    assert_eq!(
        again.import((ID, "ks", "t"), options).unwrap(),
        ImportStatus::Done
    );
    assert!(matches!(
        again
            .upload(
                (ID, "ks", "t", "nb-1-big-Data.db"),
                Expected::None,
                None,
                body(&[b"x"])
            )
            .await,
        Err(UploadError::AlreadyImported { .. })
    ));
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 1);
}

#[tokio::test]
async fn imports_waiting_for_a_table_go_to_nodetool_together() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("nodetool");
    let calls = dir.path().join("calls");
    // Slow enough for the later imports to queue behind the first; each directory it is
    // given is emptied, as the node moves the files it imports.
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$@\" >> {}\nsleep 0.3\nfor d in \"$@\"; do case $d in /*) rm -f \"$d\"/*;; esac; done\n",
            calls.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = SstableUploadsConfig {
        enabled: true,
        min_free_space_percent: 0.0,
        importer: crate::config::ImporterKind::Nodetool,
        nodetool: script,
        ..Default::default()
    };
    let up = Uploads::new(&config, dir.path(), None).unwrap();
    let ids = [
        "0190c0de-7d3e-7cbe-8a7c-000000000001",
        "0190c0de-7d3e-7cbe-8a7c-000000000002",
        "0190c0de-7d3e-7cbe-8a7c-000000000003",
    ];
    for id in ids {
        up.upload(
            (id, "ks", "t", "nb-1-big-Data.db"),
            Expected::None,
            None,
            body(&[b"x"]),
        )
        .await
        .unwrap();
    }
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(
            up.import((id, "ks", "t"), ImportOptions::default())
                .unwrap(),
            ImportStatus::Pending
        );
        if i == 0 {
            // The first one's nodetool is running when the others come (after the batch's
            // 250 ms window).
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
    }
    for id in ids {
        let mut status = ImportStatus::Pending;
        for _ in 0..100 {
            status = up
                .import((id, "ks", "t"), ImportOptions::default())
                .unwrap();
            if status != ImportStatus::Pending {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(status, ImportStatus::Done, "{id}");
    }
    let said = std::fs::read_to_string(&calls).unwrap();
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 2, "{said}");
    assert_eq!(lines[0].matches(ids[0]).count(), 1, "{said}");
    assert!(
        lines[1].contains(ids[1]) && lines[1].contains(ids[2]),
        "{said}"
    );
}

/// The temporary and final files below the staging directory.
fn staged_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.join("sstable-uploads")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.file_name().into_string().unwrap());
            }
        }
    }
    out.sort();
    out
}

/// `max_component_size` is held at the byte: a component of exactly that many bytes lands
/// whole; one byte more (in any chunking) is refused naming the setting and the bound, and
/// leaves no file, temporary or final.
#[tokio::test]
async fn a_component_of_max_component_size_lands_and_one_byte_more_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let up = uploads(dir.path(), 13);
    let names = (ID, "ks", "t", "nb-1-big-Data.db");
    let got = up
        .upload(names, Expected::None, None, body(&[b"hello ", b"sstable"]))
        .await
        .unwrap();
    assert_eq!(got.size, 13);
    assert_eq!(staged_files(dir.path()), ["nb-1-big-Data.db"]);

    let over = (ID, "ks", "t", "nb-1-big-Index.db");
    for parts in [
        &[b"hello ".as_slice(), b"sstable!"][..],
        &[b"hello sstable", b"!"],
    ] {
        let err = up
            .upload(over, Expected::None, None, body(parts))
            .await
            .unwrap_err();
        assert!(
            matches!(err, UploadError::TooLarge { limit: 13, .. }),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "component nb-1-big-Index.db is longer than sstable_uploads.max_component_size (13 bytes)"
        );
        assert_eq!(staged_files(dir.path()), ["nb-1-big-Data.db"]);
    }
}

/// `max_staged_uploads` uploads may be staged at once: the last of them is taken, a new one
/// beyond is refused naming the setting, and more components of a staged upload still are.
#[tokio::test]
async fn max_staged_uploads_are_taken_and_one_more_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = SstableUploadsConfig {
        enabled: true,
        min_free_space_percent: 0.0,
        max_staged_uploads: 3,
        ..Default::default()
    };
    let up = Uploads::new(&config, dir.path(), None).unwrap();
    let id = |n: u32| format!("0190c0de-7d3e-7cbe-8a7c-0000000000{n:02}");
    for n in 0..3 {
        up.upload(
            (&id(n), "ks", "t", "nb-1-big-Data.db"),
            Expected::None,
            None,
            body(&[b"x"]),
        )
        .await
        .unwrap();
    }
    let err = up
        .upload(
            (&id(3), "ks", "t", "nb-1-big-Data.db"),
            Expected::None,
            None,
            body(&[b"x"]),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, UploadError::TooMany(_)), "{err}");
    assert!(
        err.to_string()
            .starts_with("3 uploads are staged already (sstable_uploads.max_staged_uploads)"),
        "{err}"
    );
    assert!(!dir.path().join("sstable-uploads").join(id(3)).exists());
    up.upload(
        (&id(2), "ks", "t", "nb-1-big-Index.db"),
        Expected::None,
        None,
        body(&[b"x"]),
    )
    .await
    .unwrap();
    // One deleted, a new one is taken again.
    up.delete(&id(0)).await.unwrap();
    up.upload(
        (&id(3), "ks", "t", "nb-1-big-Data.db"),
        Expected::None,
        None,
        body(&[b"x"]),
    )
    .await
    .unwrap();
}

/// New uploads arriving together do not each find room for one more: however many come at
/// once, `max_staged_uploads` are staged and the others refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_arriving_together_stage_no_more_than_max_staged_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let config = SstableUploadsConfig {
        enabled: true,
        min_free_space_percent: 0.0,
        max_staged_uploads: 2,
        ..Default::default()
    };
    let up = Uploads::new(&config, dir.path(), None).unwrap();
    let ids: Vec<String> = (0..16)
        .map(|n| format!("0190c0de-7d3e-7cbe-8a7c-0000000000{n:02}"))
        .collect();
    let results = futures::future::join_all(ids.iter().map(|id| {
        up.upload(
            (id, "ks", "t", "nb-1-big-Data.db"),
            Expected::None,
            None,
            body(&[b"x"]),
        )
    }))
    .await;
    let taken = results.iter().filter(|r| r.is_ok()).count();
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Ok(_) | Err(UploadError::TooMany(_)))),
        "{:?}",
        results
            .iter()
            .map(|r| r.as_ref().err().map(|e| e.to_string()))
            .collect::<Vec<_>>()
    );
    let staged = std::fs::read_dir(dir.path().join("sstable-uploads"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_dir())
        .count();
    assert_eq!((taken, staged), (2, 2));
}

#[tokio::test]
async fn a_silent_body_times_out_and_a_dropped_upload_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = SstableUploadsConfig {
        enabled: true,
        min_free_space_percent: 0.0,
        idle_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let up = Uploads::new(&config, dir.path(), None).unwrap();
    let names = (ID, "ks", "t", "nb-1-big-Data.db");
    // Some bytes, then nothing: given up after idle_timeout, its file gone.
    let silent = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"abc"))])
        .chain(futures::stream::pending());
    let err = up
        .upload(names, Expected::None, Some(10), Box::pin(silent))
        .await
        .unwrap_err();
    assert!(
        matches!(err, UploadError::Idle { received: 3, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("sstable_uploads.idle_timeout"));
    assert_eq!(
        test_support::temporary_files(dir.path()),
        Vec::<PathBuf>::new()
    );
    // A body that keeps trickling, each pause shorter than idle_timeout, lands however long
    // it takes in all.
    let slow = futures::stream::iter(0..8).then(|_| async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok::<_, std::io::Error>(Bytes::from_static(b"x"))
    });
    let got = up
        .upload(names, Expected::None, Some(8), Box::pin(slow))
        .await
        .unwrap();
    assert_eq!(got.size, 8);
    assert!(got.elapsed > config.idle_timeout);
    // The request's future dropped mid-body (its client gone): the file goes with it.
    let names = (ID, "ks", "t", "nb-2-big-Data.db");
    let stalled = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"abc"))])
        .chain(futures::stream::pending());
    let upload = up.upload(names, Expected::None, None, Box::pin(stalled));
    assert!(
        tokio::time::timeout(Duration::from_millis(100), upload)
            .await
            .is_err()
    );
    assert_eq!(
        test_support::temporary_files(dir.path()),
        Vec::<PathBuf>::new()
    );
}
