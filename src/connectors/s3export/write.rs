//! Writing a DynamoDB table as an S3 export, in AWS's layout under the target `path`:
//! `data/<name>.json.gz` (one per scan segment), `manifest-files.json` and
//! `manifest-summary.json`.
//!
//! A segment's file is written under a temporary name while the segment is read, then made
//! visible whole — renamed after an fsync on a local disk, uploaded as one multipart upload in
//! S3 — and only then recorded: first in a small record of its own (`_drover/parts/`, with its
//! item count and MD5 digest), then complete in savepoints. The manifests are written from
//! those records once every segment is complete, the summary last: a reader that finds the
//! summary finds every file it lists complete. A segment copied again (after a crash, before a
//! savepoint recorded it) replaces its file and its record.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use md5::{Digest, Md5};
use object_store::path::Path as ObjPath;
use object_store::{ObjectStoreExt, PutPayload};

use super::ExportError;
use super::config::ExportTarget;
use super::format::{self, DataFile};
use crate::connectors::dynamodb::config::DynamoSource;
use crate::connectors::dynamodb::item::{Item, rename};
use crate::connectors::dynamodb::scan::SegmentScan;
use crate::connectors::dynamodb::table::{self, Described};
use crate::connectors::dynamodb::transfer::{self, DEFAULT_PARALLEL_SEGMENTS, DEFAULT_SEGMENTS};
use crate::connectors::parquet::store::Store;
use crate::connectors::seam::SeamError;
use crate::connectors::seam::{Pacing, Pushed, Refused, Sink};
use crate::connectors::unit_files::{
    FileError, FileFormat, UnitBatch, UnitFiles, UnitInfo, UnitRequest,
};
use crate::jobfile::Rename;
use crate::savepoints;

/// Items per write request (lines appended to the segment's file).
const ITEMS_PER_REQUEST: usize = 1000;
/// Records of data files read at once when the manifests are written.
const RECORDS_AT_ONCE: usize = 16;
/// Where the record of each complete data file is kept, below the target path.
const PARTS_DIR: &str = "_drover/parts";

/// Writes items of a DynamoDB scan as an export, a data file per segment.
pub struct ExportSink {
    files: Arc<Files>,
    renames: Vec<(String, String)>,
    /// When the export began, for the summary.
    started: chrono::DateTime<chrono::Utc>,
    /// Key schema and attribute types of the table, for the summary.
    table: Described,
}

/// Where the export goes (shared with the blocking tasks that write).
type Files = UnitFiles<ExportFiles>;

/// A segment's data file: DynamoDB JSON lines, gzipped, digested as written.
pub struct ExportFiles;

/// Digests the bytes written through it (the compressed file, as a reader will download it).
pub struct Digesting<W> {
    inner: W,
    md5: Md5,
}

impl<W: Write> Write for Digesting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.md5.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl FileFormat for ExportFiles {
    type Piece = String;
    /// Lines are encoded as items are pushed.
    type Encoded = Vec<String>;
    type Writer = flate2::write::GzEncoder<Digesting<std::io::BufWriter<std::fs::File>>>;
    /// The MD5 digest of the file, base64.
    type Closed = String;

    fn open(&self, file: std::fs::File, _unit: &UnitInfo) -> Result<Self::Writer, String> {
        Ok(flate2::write::GzEncoder::new(
            Digesting {
                inner: std::io::BufWriter::with_capacity(256 * 1024, file),
                md5: Md5::new(),
            },
            flate2::Compression::default(),
        ))
    }

    fn encode(&self, lines: Vec<String>) -> Result<Vec<String>, String> {
        Ok(lines)
    }

    fn write(&self, encoder: &mut Self::Writer, lines: Vec<String>) -> Result<(), String> {
        for line in &lines {
            encoder
                .write_all(line.as_bytes())
                .and_then(|()| encoder.write_all(b"\n"))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn close(&self, encoder: Self::Writer) -> Result<(std::fs::File, String), String> {
        let digesting = encoder.finish().map_err(|e| e.to_string())?;
        let digest = format::md5_base64(&digesting.md5.finalize());
        let file = digesting.inner.into_inner().map_err(|e| e.to_string())?;
        Ok((file, digest))
    }
}

impl From<FileError> for ExportError {
    fn from(e: FileError) -> Self {
        ExportError::Write {
            file: e.file,
            message: e.message,
        }
    }
}

/// The name of a unit's data file: stable for the unit, so a unit copied again replaces it.
fn file_name(key: &str) -> String {
    format!(
        "{:016x}.json.gz",
        xxhash_rust::xxh3::xxh3_64(key.as_bytes())
    )
}

/// The export's own objects beside the data files: records, manifests.
impl Files {
    /// The key a manifest records for `rel`: relative to the summary for a local export (as
    /// ScyllaDB Migrator writes them), the full key in S3 (as AWS writes them).
    fn manifest_key(&self, rel: &str) -> String {
        if self.store.local_root.is_some() {
            rel.to_string()
        } else {
            self.path(rel).to_string()
        }
    }

    fn store_error(&self, what: &str, e: impl std::fmt::Display) -> ExportError {
        ExportError::Write {
            file: what.to_string(),
            message: e.to_string(),
        }
    }

    /// Writes a small object whole: renamed into place on disk, one PUT in S3.
    async fn put_small(&self, rel: &str, bytes: Vec<u8>) -> Result<(), ExportError> {
        let path = self.path(rel);
        let id = self.store.id_of(&path);
        if let Some(root) = &self.store.local_root {
            let to = root.join(rel);
            let result = tokio::task::spawn_blocking(move || {
                if let Some(dir) = to.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                crate::fsutil::write_atomic(&to, &bytes)
            })
            .await
            .expect("writing a file does not panic");
            return result.map_err(|e| self.store_error(&id, e));
        }
        self.store
            .inner
            .put(&path, PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| self.store_error(&id, e))
    }

    async fn delete(&self, rel: &str) -> Result<(), ExportError> {
        let path = self.path(rel);
        match self.store.inner.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.store_error(&self.store.id_of(&path), e)),
        }
    }
}

/// Connects to the source table, checks the target path (empty, unless the run resumes), and
/// prepares the scan and the writer. Nothing is written yet.
pub async fn open_export(
    src: &DynamoSource,
    dst: &ExportTarget,
    renames: &[Rename],
    done: &savepoints::Progress,
) -> Result<(SegmentScan, ExportSink, Pacing), SeamError> {
    let invalid = |message: String| ExportError::Invalid {
        key: "target.path".into(),
        message,
    };
    let store = Store::open("target", &dst.location, &dst.s3)
        .map_err(|e| SeamError::from(invalid(e.to_string())))?;
    if let Some(root) = &store.local_root
        && root.is_file()
    {
        return Err(invalid(format!(
            "{} is a file; an export is a directory",
            root.display()
        ))
        .into());
    }
    let existing = store
        .list_all()
        .await
        .map_err(|e| SeamError::from(invalid(e.to_string())))?;
    if done
        .numbers(&crate::connectors::dynamodb::SEGMENTS)
        .is_empty()
        && !existing.is_empty()
    {
        return Err(invalid(format!(
            "{} already holds {} files ({} first); an export is written to an empty place: delete them or choose another path",
            dst.location,
            existing.len(),
            store.id_of(&existing[0].location)
        ))
        .into());
    }
    let client = crate::connectors::dynamodb::client(&src.connection).await;
    let source = table::source(&client, &src.connection)
        .await
        .map_err(|e| e.on("source"))?;
    transfer::key_not_renamed(&source, renames)?;
    let segments = src.scan_segments.unwrap_or(DEFAULT_SEGMENTS);
    let read_units = transfer::rate(
        src.read_throughput
            .map(i64::from)
            .or(source.provisioned().map(|(r, _)| r)),
        src.throughput_read_percent,
    );
    let parallel = src
        .max_map_tasks
        .unwrap_or(DEFAULT_PARALLEL_SEGMENTS)
        .min(segments) as usize;
    let scan = SegmentScan::new(
        client,
        &src.connection.table,
        segments,
        read_units,
        !src.connection.remove_consumed_capacity,
    );
    tracing::info!(
        source = %crate::connectors::dynamodb::describe(&src.connection),
        target = %dst.location,
        segments,
        parallel,
        "DynamoDB export to S3 format planned"
    );
    let sink = ExportSink {
        files: Arc::new(
            Files::new(store, "drover-export-spool", ExportFiles).map_err(ExportError::from)?,
        ),
        renames: renames
            .iter()
            .map(|r| (r.from.clone(), r.to.clone()))
            .collect(),
        started: chrono::Utc::now(),
        table: source,
    };
    let pacing = Pacing {
        units_finishing: 0,
        units_at_once: parallel,
        requests_in_flight: (parallel * 2).max(4),
        rows_per_second: None,
        bytes_per_second: None,
    };
    Ok((scan, sink, pacing))
}

impl Sink<Item> for ExportSink {
    type Request = UnitRequest<ExportFiles>;
    type Error = ExportError;
    type Batcher = UnitBatch<ExportFiles>;

    async fn start(&self) -> Result<(), ExportError> {
        // A resumed export on disk: temporary files of a run that died mid-file would be read
        // as data by whatever imports the `data/` folder.
        let Some(root) = &self.files.store.local_root else {
            return Ok(());
        };
        let data = root.join("data");
        match crate::fsutil::remove_stale_temp_files(&data) {
            Ok(0) => Ok(()),
            Ok(n) => {
                tracing::info!(folder = %data.display(), removed = n, "temporary files of an interrupted export removed");
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ExportError::Write {
                file: data.display().to_string(),
                message: format!("cannot remove temporary files: {e}"),
            }),
        }
    }

    fn begin(&self, unit: &str) -> Self::Batcher {
        self.files.begin(unit)
    }

    fn push(
        &self,
        b: &mut Self::Batcher,
        row: &Item,
        _read_at: Instant,
        out: &mut Vec<Self::Request>,
    ) -> Result<Pushed, Refused> {
        let line = if self.renames.is_empty() {
            format::encode_line(row)
        } else {
            let mut item = row.clone();
            rename(&mut item, &self.renames);
            format::encode_line(&item)
        }
        .map_err(Refused)?;
        let bytes = line.len() as u64;
        b.push(line, bytes, ITEMS_PER_REQUEST, out);
        Ok(Pushed::Written)
    }

    fn flush(&self, b: &mut Self::Batcher, out: &mut Vec<Self::Request>) {
        b.take(out);
    }

    async fn send(&self, request: &Self::Request) -> Result<(), ExportError> {
        let rel = format!("data/{}", file_name(&request.unit().key));
        Ok(self.files.append(&rel, request).await?)
    }

    async fn finish(&self, batcher: Self::Batcher) -> Result<(), ExportError> {
        let name = file_name(&batcher.unit().key);
        let data_rel = format!("data/{name}");
        let part_rel = format!("{PARTS_DIR}/{name}.json");
        // The record goes first: a crash from here on leaves no record of a file that may
        // not be whole, and the unit, not yet recorded complete, is copied again.
        self.files.delete(&part_rel).await?;
        let Some(placed) = self.files.place(batcher, &data_rel).await? else {
            // No item in this segment: no file (and none left of an earlier run's).
            return self.files.delete(&data_rel).await;
        };
        let record = DataFile {
            item_count: Some(placed.pieces),
            md5_checksum: Some(placed.closed),
            etag: None,
            data_file_s3_key: self.files.manifest_key(&data_rel),
        };
        let line = serde_json::to_vec(&record).expect("a record serializes");
        self.files.put_small(&part_rel, line).await
    }

    async fn complete(&self) -> Result<(), ExportError> {
        let files = &self.files;
        let parts_dir = files.path(PARTS_DIR);
        let listed: Vec<object_store::ObjectMeta> = files
            .store
            .inner
            .list(Some(&parts_dir))
            .try_collect()
            .await
            .map_err(|e| files.store_error(&files.store.id_of(&parts_dir), e))?;
        // One small GET per data file: a few at once, since an export may have many files.
        let paths: Vec<ObjPath> = listed
            .into_iter()
            .map(|m| m.location)
            .filter(|p| p.filename().is_some_and(|n| n.ends_with(".json")))
            .collect();
        let mut records: Vec<DataFile> = futures::stream::iter(paths)
            .map(|path| {
                let files = files.clone();
                async move {
                    let id = files.store.id_of(&path);
                    let bytes = files
                        .store
                        .inner
                        .get(&path)
                        .await
                        .map_err(|e| files.store_error(&id, e))?
                        .bytes()
                        .await
                        .map_err(|e| files.store_error(&id, e))?;
                    serde_json::from_slice::<DataFile>(&bytes)
                        .map_err(|e| files.store_error(&id, format!("not a data file record: {e}")))
                }
            })
            .buffer_unordered(RECORDS_AT_ONCE)
            .try_collect()
            .await?;
        records.sort_by(|a, b| a.data_file_s3_key.cmp(&b.data_file_s3_key));
        let mut manifest = String::new();
        for r in &records {
            manifest.push_str(&serde_json::to_string(r).expect("a record serializes"));
            manifest.push('\n');
        }
        let items: u64 = records.iter().filter_map(|r| r.item_count).sum();
        files
            .put_small("manifest-files.json", manifest.into_bytes())
            .await?;
        let summary = self.summary(items, records.len());
        files
            .put_small("manifest-summary.json", summary.to_string().into_bytes())
            .await?;
        tracing::info!(
            export = %files.store.location,
            items,
            data_files = records.len(),
            "DynamoDB S3 export complete: manifests written"
        );
        Ok(())
    }
}

impl ExportSink {
    fn summary(&self, items: u64, data_files: usize) -> serde_json::Value {
        let t = &self.table.table;
        let time = |t: chrono::DateTime<chrono::Utc>| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        let mut s = serde_json::json!({
            "version": format::VERSION,
            "exportType": format::FULL_EXPORT,
            "outputFormat": format::DYNAMODB_JSON,
            "startTime": time(self.started),
            "exportTime": time(self.started),
            "endTime": time(chrono::Utc::now()),
            "manifestFilesS3Key": self.files.manifest_key("manifest-files.json"),
            "itemCount": items,
            "dataFileCount": data_files,
            "tableKeySchema": t.key_schema().iter().map(|k| serde_json::json!({
                "AttributeName": k.attribute_name(),
                "KeyType": k.key_type().as_str(),
            })).collect::<Vec<_>>(),
            "tableAttributeDefinitions": t.attribute_definitions().iter().map(|a| serde_json::json!({
                "AttributeName": a.attribute_name(),
                "AttributeType": a.attribute_type().as_str(),
            })).collect::<Vec<_>>(),
        });
        if let Some(arn) = t.table_arn() {
            s["tableArn"] = arn.into();
        }
        if let crate::connectors::parquet::config::Location::S3 { bucket, prefix, .. } =
            &self.files.store.location
        {
            s["s3Bucket"] = bucket.as_str().into();
            s["s3Prefix"] = prefix.as_str().into();
        }
        s
    }
}
