//! Reading a DynamoDB S3 export: the manifest summary and its manifest of data files are read
//! when the job starts (a missing or malformed one fails the job before anything is written),
//! then each data file is a unit, streamed — downloaded, decompressed and parsed line by line
//! in a blocking task, one page of items at a time — so memory holds a few pages per file
//! whatever the file's size. Its item count and MD5 digest (when the manifest records them)
//! are checked at its end: a file that does not match fails its unit, which is then not
//! recorded complete.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;

use futures::TryStreamExt;
use md5::{Digest, Md5};
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt};

use super::ExportError;
use super::config::{ExportSource, KeyType};
use super::format::{self, DataFile, Summary};
use crate::connectors::dynamodb::config::DynamoTarget;
use crate::connectors::dynamodb::item::{Item, item_size};
use crate::connectors::dynamodb::table::{self, Described};
use crate::connectors::dynamodb::transfer::{self, BatchSink};
use crate::connectors::parquet::config::Location;
use crate::connectors::parquet::store::Store;
use crate::connectors::seam::SeamError;
use crate::connectors::seam::{Pacing, Page, Plan, Retry, Scan, Unit};
use crate::connectors::streamed::Streams;
use crate::jobfile::Rename;
use crate::savepoints;

/// Items per page handed to the engine.
const PAGE_ITEMS: usize = 1000;
/// Bytes of items per page, at most (about).
const PAGE_BYTES: usize = 4 * 1024 * 1024;
/// The longest line of a data file: an item is 400 KB at most in DynamoDB, more as base64
/// and JSON; anything far longer is not an item.
const MAX_LINE: usize = 8 * 1024 * 1024;
/// The largest manifest summary or manifest of files read: a line per data file.
const MAX_MANIFEST: u64 = 64 * 1024 * 1024;

/// One data file of the export.
#[derive(Debug, Clone)]
pub struct FileUnit {
    /// `s3://bucket/key`: its name in messages and in `skipExportDataFiles`.
    pub id: String,
    /// Its key in the bucket.
    pub path: ObjPath,
    /// What the manifest says of it.
    pub entry: DataFile,
    /// Its lines are Amazon Ion (`outputFormat: ION`), not DynamoDB JSON.
    pub ion: bool,
}

impl fmt::Display for FileUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

impl Unit for FileUnit {
    fn record(&self, done: &mut savepoints::Progress) {
        done.names_mut(&super::FILES).insert(self.id.clone());
    }
}

/// The data files of an export, read file by file.
pub struct ExportScan {
    store: Arc<dyn ObjectStore>,
    files: Vec<FileUnit>,
    open: Streams<Item, ExportError>,
}

/// An export's manifests, read.
pub struct Manifest {
    /// The summary.
    pub summary: Summary,
    /// Its data files.
    pub files: Vec<FileUnit>,
}

fn invalid(key: &str, message: String) -> ExportError {
    ExportError::Invalid {
        key: key.into(),
        message,
    }
}

/// Reads a whole (small) object: a manifest.
async fn read_small(
    store: &dyn ObjectStore,
    bucket: &str,
    path: &ObjPath,
    key: &str,
) -> Result<String, ExportError> {
    let id = format!("s3://{bucket}/{path}");
    let got = store.get(path).await.map_err(|e| match e {
        object_store::Error::NotFound { .. } => invalid(key, format!("{id} does not exist")),
        e => invalid(
            key,
            format!(
                "cannot read {id}: {}",
                crate::answer::shown_urls_in(&e.to_string())
            ),
        ),
    })?;
    if got.meta.size > MAX_MANIFEST {
        return Err(invalid(
            key,
            format!(
                "{id} is {} bytes, more than the {MAX_MANIFEST} bytes a manifest may have",
                got.meta.size
            ),
        ));
    }
    let bytes = got
        .bytes()
        .await
        .map_err(|e| invalid(key, format!("cannot read {id}: {e}")))?;
    String::from_utf8(bytes.to_vec()).map_err(|_| invalid(key, format!("{id} is not UTF-8 text")))
}

/// Reads the export's manifest summary and manifest of data files.
pub async fn read_manifest(
    store: &dyn ObjectStore,
    src: &ExportSource,
) -> Result<Manifest, ExportError> {
    let key = "source.manifestKey";
    let summary_path = ObjPath::from(src.manifest_key.as_str());
    let text = read_small(store, &src.bucket, &summary_path, key).await?;
    let summary_id = format!("s3://{}/{}", src.bucket, src.manifest_key);
    let summary: Summary = serde_json::from_str(&text).map_err(|e| {
        invalid(
            key,
            format!("{summary_id} is not an export's manifest summary: {e}"),
        )
    })?;
    if let Some(t) = summary.export_type.as_deref()
        && t != format::FULL_EXPORT
    {
        return Err(invalid(
            key,
            format!(
                "{summary_id} is an export of type {t:?}; only full exports ({}) hold whole tables",
                format::FULL_EXPORT
            ),
        ));
    }
    if summary.output_format != format::DYNAMODB_JSON && summary.output_format != format::ION {
        return Err(invalid(
            key,
            format!(
                "{summary_id} has data files in {:?}; expected {} or {}",
                summary.output_format,
                format::DYNAMODB_JSON,
                format::ION
            ),
        ));
    }
    let ion = summary.output_format == format::ION;
    // Keys are full in AWS's exports, relative to the summary in ScyllaDB Migrator's.
    let dir = match src.manifest_key.rfind('/') {
        Some(i) => &src.manifest_key[..=i],
        None => "",
    };
    let resolve = |k: &str| {
        let k = k.trim_start_matches('/');
        if dir.is_empty() || k.starts_with(dir) {
            k.to_string()
        } else {
            format!("{dir}{k}")
        }
    };
    let files_key = resolve(&summary.manifest_files_s3_key);
    let files_text =
        read_small(store, &src.bucket, &ObjPath::from(files_key.as_str()), key).await?;
    let files_id = format!("s3://{}/{files_key}", src.bucket);
    let entries =
        format::parse_manifest_files(&files_id, &files_text).map_err(|m| invalid(key, m))?;
    let listed: u64 = entries.iter().filter_map(|f| f.item_count).sum();
    if entries.iter().all(|f| f.item_count.is_some()) && listed != summary.item_count {
        tracing::warn!(
            summary = %summary_id,
            summary_items = summary.item_count,
            listed_items = listed,
            "the manifest summary's item count differs from the sum of its data files'"
        );
    }
    let files = entries
        .into_iter()
        .map(|entry| {
            let k = resolve(&entry.data_file_s3_key);
            FileUnit {
                id: format!("s3://{}/{k}", src.bucket),
                path: ObjPath::from(k.as_str()),
                entry,
                ion,
            }
        })
        .collect();
    Ok(Manifest { summary, files })
}

/// The table an export was taken of, as the job describes it: what a created target gets.
pub fn described(src: &ExportSource) -> Described {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, BillingModeSummary, KeySchemaElement,
        ProvisionedThroughputDescription, ScalarAttributeType,
    };
    let t = &src.table;
    let billing = match t.billing_mode {
        Some(crate::connectors::dynamodb::config::BillingMode::Provisioned) => {
            BillingMode::Provisioned
        }
        _ => BillingMode::PayPerRequest,
    };
    let mut table = aws_sdk_dynamodb::types::TableDescription::builder()
        .billing_mode_summary(BillingModeSummary::builder().billing_mode(billing).build());
    for a in &t.attribute_definitions {
        let ty = match a.kind {
            super::config::AttributeType::S => ScalarAttributeType::S,
            super::config::AttributeType::N => ScalarAttributeType::N,
            super::config::AttributeType::B => ScalarAttributeType::B,
        };
        table = table.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(&a.name)
                .attribute_type(ty)
                .build()
                .expect("name and type set"),
        );
    }
    for k in &t.key_schema {
        let kt = match k.kind {
            KeyType::Hash => aws_sdk_dynamodb::types::KeyType::Hash,
            KeyType::Range => aws_sdk_dynamodb::types::KeyType::Range,
        };
        table = table.key_schema(
            KeySchemaElement::builder()
                .attribute_name(&k.name)
                .key_type(kt)
                .build()
                .expect("name and type set"),
        );
    }
    if let Some(p) = t.provisioned_throughput {
        table = table.provisioned_throughput(
            ProvisionedThroughputDescription::builder()
                .read_capacity_units(p.read_capacity_units)
                .write_capacity_units(p.write_capacity_units)
                .build(),
        );
    }
    Described {
        table: table.build(),
        ttl_attribute: None,
    }
}

/// Reads the export's manifests, creates or checks the target table, and returns the scan of
/// the data files, the writer and the job's bounds. Nothing is written to the target's items.
pub async fn open_load(
    src: &ExportSource,
    dst: &DynamoTarget,
    renames: &[Rename],
) -> Result<(ExportScan, BatchSink, Pacing), SeamError> {
    let location = Location::S3 {
        scheme: "s3".into(),
        bucket: src.bucket.clone(),
        prefix: String::new(),
    };
    let store = Store::open("source", &location, &src.s3)
        .map_err(|e| SeamError::from(invalid("source", e.to_string())))?;
    let manifest = read_manifest(store.inner.as_ref(), src).await?;
    let source = described(src);
    transfer::key_not_renamed(&source, renames)?;
    let client = crate::connectors::dynamodb::client(&dst.connection).await;
    let target = table::ensure_target(&client, &dst.connection, &source, dst.billing_mode)
        .await
        .map_err(|e| e.on("target"))?;
    let write_units = transfer::rate(
        dst.write_throughput
            .map(i64::from)
            .or(target.provisioned().map(|(_, w)| w)),
        dst.throughput_write_percent,
    );
    tracing::info!(
        manifest = %format!("s3://{}/{}", src.bucket, src.manifest_key),
        items = manifest.summary.item_count,
        data_files = manifest.files.len(),
        target = %crate::connectors::dynamodb::describe(&dst.connection),
        "DynamoDB S3 export load planned"
    );
    let sink = BatchSink::new(client, dst, renames, None);
    let pacing = Pacing {
        units_finishing: 0,
        units_at_once: src.files_at_once,
        requests_in_flight: (src.files_at_once * 2).max(4),
        rows_per_second: write_units,
        bytes_per_second: write_units.map(|w| u64::from(w) * 1024),
    };
    let scan = ExportScan {
        store: store.inner,
        files: manifest.files,
        open: Streams::default(),
    };
    Ok((scan, sink, pacing))
}

impl Scan for ExportScan {
    type Unit = FileUnit;
    type Row = Item;
    type Cursor = u64;
    type Error = ExportError;

    fn plan(&self, done: &savepoints::Progress) -> Plan<FileUnit> {
        let work: Vec<FileUnit> = self
            .files
            .iter()
            .filter(|f| !done.names(&super::FILES).contains(&f.id))
            .cloned()
            .collect();
        Plan {
            total: self.files.len() as u64,
            skipped: (self.files.len() - work.len()) as u64,
            work,
        }
    }

    fn start(&self, _: &FileUnit) -> u64 {
        0
    }

    async fn page(&self, unit: &FileUnit, cursor: &u64) -> Result<Page<Item, u64>, ExportError> {
        let (store, file) = (self.store.clone(), unit.clone());
        self.open
            .page(
                &unit.id,
                *cursor,
                |tx| stream_file(store, file, tx),
                || ExportError::Read {
                    file: unit.id.clone(),
                    message: "the reading task ended without a result".into(),
                    retry: Retry::Safe,
                },
            )
            .await
    }

    fn row_size(row: &Item) -> usize {
        item_size(row)
    }

    /// The manifest's item count of each file (AWS writes one for every file: exact).
    async fn expect(&self, work: &[FileUnit]) -> Vec<Option<crate::connectors::seam::Expected>> {
        work.iter()
            .map(|unit| {
                unit.entry
                    .item_count
                    .map(|n| crate::connectors::seam::Expected {
                        count: n as f64,
                        bytes: 0.0,
                        exact: true,
                    })
            })
            .collect()
    }
}

type PageSender = crate::connectors::streamed::PageSender<Item, ExportError>;

/// Downloads, decompresses and parses one data file, sending its items page by page; the last
/// page (maybe empty) is sent once the file's count and digest are checked.
async fn stream_file(store: Arc<dyn ObjectStore>, unit: FileUnit, tx: PageSender) {
    let fail = |message: String, retry: Retry| ExportError::Read {
        file: unit.id.clone(),
        message,
        retry,
    };
    let got = match store.get(&unit.path).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => {
            let _ = tx
                .send(Err(fail(
                    "does not exist, but the export's manifest lists it".into(),
                    Retry::Never,
                )))
                .await;
            return;
        }
        Err(e) => {
            let _ = tx.send(Err(fail(e.to_string(), Retry::Safe))).await;
            return;
        }
    };
    let body = tokio_util::io::StreamReader::new(got.into_stream().map_err(std::io::Error::other));
    let sync = tokio_util::io::SyncIoBridge::new(body);
    let joined = tokio::task::spawn_blocking(move || parse_file(sync, &unit, &tx)).await;
    if let Err(e) = joined {
        tracing::error!(error = %e, "a data file reader panicked");
    }
}

/// Counts and digests the bytes read through it.
struct Digesting<R> {
    inner: R,
    md5: Md5,
}

impl<R: Read> Read for Digesting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.md5.update(&buf[..n]);
        Ok(n)
    }
}

fn parse_file(body: impl Read, unit: &FileUnit, tx: &PageSender) {
    let fail = |message: String, retry: Retry| ExportError::Read {
        file: unit.id.clone(),
        message,
        retry,
    };
    let mut digesting = Digesting {
        inner: body,
        md5: Md5::new(),
    };
    let mut lines = BufReader::with_capacity(
        256 * 1024,
        flate2::read::MultiGzDecoder::new(&mut digesting),
    );
    let mut page = Vec::new();
    let mut page_bytes = 0;
    let mut line = Vec::new();
    let mut count: u64 = 0;
    for number in 1u64.. {
        line.clear();
        let read = (&mut lines)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                // A download that broke can be tried again; anything else (a truncated or
                // corrupt gzip stream) is the file's content.
                let retry = if e
                    .get_ref()
                    .is_some_and(|inner| inner.is::<object_store::Error>())
                {
                    Retry::Safe
                } else {
                    Retry::Never
                };
                let _ = tx.blocking_send(Err(fail(
                    format!("line {number}: cannot read or decompress (gzip): {e}"),
                    retry,
                )));
                return;
            }
        }
        // The newline ends the line; it is not part of it.
        if line.strip_suffix(b"\n").unwrap_or(&line).len() > MAX_LINE {
            let _ = tx.blocking_send(Err(fail(
                format!("line {number} is longer than {MAX_LINE} bytes: not an item"),
                Retry::Never,
            )));
            return;
        }
        let text = match std::str::from_utf8(&line) {
            Ok(t) => t.trim(),
            Err(_) => {
                let _ = tx.blocking_send(Err(fail(
                    format!("line {number} is not UTF-8 text"),
                    Retry::Never,
                )));
                return;
            }
        };
        if text.is_empty() {
            continue;
        }
        let parsed = if unit.ion {
            super::ion::parse_line(text)
        } else {
            format::parse_line(text)
        };
        match parsed {
            Ok(item) => {
                count += 1;
                page_bytes += text.len();
                page.push(item);
            }
            Err(e) => {
                let _ = tx.blocking_send(Err(fail(format!("line {number}: {e}"), Retry::Never)));
                return;
            }
        }
        if page.len() >= PAGE_ITEMS || page_bytes >= PAGE_BYTES {
            page_bytes = 0;
            if tx
                .blocking_send(Ok((std::mem::take(&mut page), false, None)))
                .is_err()
            {
                // The unit was stopped.
                return;
            }
        }
    }
    drop(lines);
    // Whatever follows the last gzip member (nothing, normally) counts in the digest too.
    if let Err(e) = std::io::copy(&mut digesting, &mut std::io::sink()) {
        let _ = tx.blocking_send(Err(fail(e.to_string(), Retry::Safe)));
        return;
    }
    if let Some(want) = &unit.entry.md5_checksum {
        let got = format::md5_base64(&digesting.md5.finalize());
        if &got != want {
            let _ = tx.blocking_send(Err(fail(
                format!("its MD5 digest is {got}, but the manifest says {want}: the file is not the one exported"),
                Retry::Never,
            )));
            return;
        }
    }
    if let Some(want) = unit.entry.item_count
        && want != count
    {
        let _ = tx.blocking_send(Err(fail(
            format!("holds {count} items, but the manifest says {want}"),
            Retry::Never,
        )));
        return;
    }
    let _ = tx.blocking_send(Ok((page, true, None)));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The data lines of one file, gzipped as an export stores them, read through
    /// [`parse_file`]: the items read, or the error.
    fn read(lines: &[Vec<u8>]) -> Result<Vec<Item>, String> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        for line in lines {
            gz.write_all(line).unwrap();
        }
        let body = gz.finish().unwrap();
        let unit = FileUnit {
            id: "s3://b/data/f.json.gz".into(),
            path: ObjPath::from("data/f.json.gz"),
            entry: DataFile {
                item_count: None,
                md5_checksum: None,
                etag: None,
                data_file_s3_key: "data/f.json.gz".into(),
            },
            ion: false,
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
        std::thread::spawn(move || parse_file(&body[..], &unit, &tx));
        let mut items = Vec::new();
        while let Some(sent) = rx.blocking_recv() {
            let (page, last, _) = sent.map_err(|e| e.to_string())?;
            items.extend(page);
            if last {
                break;
            }
        }
        Ok(items)
    }

    /// An item line of `len` bytes, without its newline.
    fn item_line(len: usize) -> Vec<u8> {
        let frame = r#"{"Item":{"k":{"S":""}}}"#;
        let text = format!(
            r#"{{"Item":{{"k":{{"S":"{}"}}}}}}"#,
            "x".repeat(len - frame.len())
        );
        assert_eq!(text.len(), len);
        text.into_bytes()
    }

    /// A line of exactly [`MAX_LINE`] bytes is an item, newline or not; a line one byte
    /// longer is refused, naming the line and the bound.
    #[test]
    fn a_line_of_max_line_bytes_is_read_and_one_byte_longer_refused() {
        let mut at = item_line(MAX_LINE);
        assert_eq!(read(std::slice::from_ref(&at)).unwrap().len(), 1);
        at.push(b'\n');
        let short = [item_line(30), b"\n".to_vec()].concat();
        assert_eq!(read(&[short.clone(), at.clone(), short]).unwrap().len(), 3);

        let over = [item_line(MAX_LINE + 1), b"\n".to_vec()].concat();
        let e = read(&[at, over]).unwrap_err();
        assert!(
            e.contains("line 2 is longer than 8388608 bytes: not an item"),
            "{e}"
        );
        let e = read(&[item_line(MAX_LINE + 1)]).unwrap_err();
        assert!(e.contains("line 1 is longer than 8388608 bytes"), "{e}");
    }
}
