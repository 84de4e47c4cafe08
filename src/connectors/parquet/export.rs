//! CQL → Parquet: each token-range unit of the source table becomes one Parquet file, written
//! under a temporary name while the unit is read and made visible only once the unit is
//! complete — renamed into place after an fsync on a local disk, uploaded as one multipart
//! upload completed at the end in S3 — so no reader, and no resumed export, ever sees a
//! truncated file.
//!
//! A file is named after the table and its unit's token ranges (which its footer also
//! records): a unit copied again (after a crash, before a savepoint recorded it) replaces its
//! file instead of adding a second one, and a resume deletes the files of units that no
//! savepoint recorded. With `preserveTimestamps`, each static and regular column's writetime
//! and TTL go into ScyllaDB Migrator's `__migrator_meta_<column>_writetime`/`_ttl` columns.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema, SchemaRef};
use object_store::path::Path as ObjPath;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::basic::{Compression as Codec, GzipLevel, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType};

use super::config::{Compression, Mode, ParquetTarget};
use super::store::{FileReader, Store, is_data_file};
use super::{META_PREFIX, ParquetError, RANGES_KEY, READ_AT_KEY, encode};
use crate::connectors::cql::rows::RawRow;
use crate::connectors::cql::scan::RangeScan;
use crate::connectors::cql::schema::{self, Column};
use crate::connectors::cql::{self, CqlSource, units};
use crate::connectors::seam::SeamError;
use crate::connectors::seam::{Pacing, Pushed, Refused, Sink};
use crate::connectors::unit_files::{
    FileError, FileFormat, UnitBatch, UnitFiles, UnitInfo, UnitRequest,
};
use crate::jobfile::Rename;
use crate::savepoints;

/// Rows per write request (one Arrow batch appended to the unit's file).
const ROWS_PER_REQUEST: usize = 4096;
/// A row group is closed once its encoded pages take this much memory: with `units_at_once`
/// files open, an export holds at most that many times this, whatever the table's size.
const ROW_GROUP_BYTES: usize = 8 * 1024 * 1024;

/// What the checks decided: copy with these parts, or nothing to do.
pub type Opened = crate::connectors::unit_files::Opened<(RangeScan, ParquetSink, Pacing)>;

/// Connects to the source, checks its table and the target location (and `mode`), and
/// prepares the scan. Nothing is written or deleted yet: that waits for [`Sink::start`].
pub async fn open_export(
    src: &CqlSource,
    dst: &ParquetTarget,
    renames: &[Rename],
    done: &savepoints::Progress,
) -> Result<Opened, SeamError> {
    let session = cql::connect("source", &src.endpoint).await?;
    cql::check_local_dc(&session, "source", src.endpoint.local_dc.as_deref())?;
    let table = schema::load(
        &session,
        "source",
        &src.endpoint.keyspace,
        &src.endpoint.table,
    )
    .await?;
    for r in renames {
        if table.all().all(|c| c.name != r.from) {
            return Err(cql::CqlError::Invalid {
                key: "renames".into(),
                message: format!(
                    "column {:?} does not exist in the source table {}",
                    r.from,
                    table.qualified()
                ),
            }
            .into());
        }
    }
    let name = |c: &Column| {
        renames
            .iter()
            .find(|r| r.from == c.name)
            .map_or(c.name.clone(), |r| r.to.clone())
    };
    let preserve = src.preserve_timestamps && !table.is_counter_table();
    let mut fields = Vec::new();
    let mut types: Vec<ColumnType<'static>> = Vec::new();
    for c in table.all() {
        let t = encode::arrow_type(&c.typ).map_err(|e| cql::CqlError::Invalid {
            key: "source.table".into(),
            message: format!("column {:?}: {e}", c.name),
        })?;
        fields.push(Field::new(name(c), t, true));
        types.push(c.typ.clone());
    }
    if preserve {
        for c in table.statics.iter().chain(&table.regular) {
            let list = c.is_multi_cell();
            for (suffix, native) in [("writetime", NativeType::BigInt), ("ttl", NativeType::Int)] {
                let scalar = ColumnType::Native(native);
                let typ = if list {
                    ColumnType::Collection {
                        frozen: false,
                        typ: CollectionType::List(Box::new(scalar)),
                    }
                } else {
                    scalar
                };
                let arrow = encode::arrow_type(&typ).expect("bigint and int lists have one");
                fields.push(Field::new(
                    format!("{META_PREFIX}{}_{suffix}", name(c)),
                    arrow,
                    true,
                ));
                types.push(typ);
            }
        }
    }
    let store = Store::open("target", &dst.location, &dst.s3)?;
    let tag = format!(
        "{:08x}",
        xxhash_rust::xxh3::xxh3_64(format!("{}.{}", table.keyspace, table.table).as_bytes()) as u32
    );
    let deletes = match plan_target(&store, dst.mode, &tag, done).await? {
        Some(d) => d,
        None => return Ok(Opened::Ignore),
    };
    let select = cql::copy::prepare_select(&session, src, &table, preserve).await?;
    let scan = RangeScan::new(
        Arc::new(session),
        table,
        select,
        src.split_count
            .unwrap_or(cql::transfer::DEFAULT_SPLIT_COUNT),
        src.endpoint.local_dc.clone(),
    );
    let units_at_once = src
        .max_concurrent_units
        .unwrap_or(cql::transfer::DEFAULT_UNITS_AT_ONCE);
    let props = WriterProperties::builder().set_compression(match dst.compression {
        Compression::None => Codec::UNCOMPRESSED,
        Compression::Snappy => Codec::SNAPPY,
        Compression::Gzip => Codec::GZIP(GzipLevel::default()),
        Compression::Lz4 => Codec::LZ4_RAW,
        Compression::Zstd => Codec::ZSTD(ZstdLevel::default()),
    });
    let sink = ParquetSink {
        files: Arc::new(
            UnitFiles::new(
                store,
                "drover-parquet-spool",
                ParquetFiles {
                    schema: Arc::new(Schema::new(fields)),
                    types,
                    props,
                    tag,
                    extension: match dst.compression {
                        Compression::None => "",
                        Compression::Snappy => ".snappy",
                        Compression::Gzip => ".gz",
                        Compression::Lz4 => ".lz4raw",
                        Compression::Zstd => ".zstd",
                    },
                },
            )
            .map_err(ParquetError::from)?,
        ),
        deletes: Mutex::new(deletes),
    };
    let pacing = Pacing {
        units_finishing: 0,
        units_at_once,
        // Writes of one unit go to one file, one after the other.
        requests_in_flight: units_at_once * 2,
        rows_per_second: None,
        bytes_per_second: None,
    };
    Ok(Opened::Copy(Box::new((scan, sink, pacing))))
}

/// What is at the target and what must go before the export starts; `None` for `ignore`
/// with files present.
async fn plan_target(
    store: &Store,
    mode: Mode,
    tag: &str,
    done: &savepoints::Progress,
) -> Result<Option<Vec<ObjPath>>, ParquetError> {
    if let Some(root) = &store.local_root
        && root.is_file()
    {
        return Err(ParquetError::Invalid {
            key: "target.path".into(),
            message: format!(
                "{} is a file; a Parquet target is a directory",
                root.display()
            ),
        });
    }
    let existing = store.list_all().await?;
    let ours = |p: &ObjPath| {
        p.filename()
            .is_some_and(|n| n.starts_with(&format!("part-{tag}-")) && n.ends_with(".parquet"))
    };
    let our_temp = |p: &ObjPath| {
        p.filename()
            .is_some_and(|n| n.starts_with(&format!(".part-{tag}-")) && n.ends_with(".tmp"))
    };
    let data: Vec<&ObjPath> = existing
        .iter()
        .map(|m| &m.location)
        .filter(|p| is_data_file(p))
        .collect();
    if !done
        .ranges(&crate::savepoints::TOKEN_RANGES)
        .ranges()
        .is_empty()
    {
        // A resume: keep the files of recorded units, delete the rest of ours (written by a
        // run that stopped before recording them; their rows are exported again).
        let mut deletes: Vec<ObjPath> = existing
            .iter()
            .map(|m| m.location.clone())
            .filter(|p| our_temp(p))
            .collect();
        for m in existing.iter().filter(|m| ours(&m.location)) {
            let mut reader = FileReader::new(store.inner.clone(), m.location.clone(), m.size);
            let covered = ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new())
                .await
                .ok()
                .and_then(|meta| {
                    let kv = meta
                        .metadata()
                        .file_metadata()
                        .key_value_metadata()?
                        .clone();
                    let key = kv.iter().find(|k| k.key == RANGES_KEY)?.value.clone()?;
                    units::parse_key(&key)
                })
                .is_some_and(|pieces| {
                    pieces
                        .iter()
                        .all(|p| done.ranges(&crate::savepoints::TOKEN_RANGES).covers(*p))
                });
            if !covered {
                deletes.push(m.location.clone());
            }
        }
        if !deletes.is_empty() {
            tracing::info!(
                "{} file(s) of units no savepoint recorded will be deleted and exported again",
                deletes.len()
            );
        }
        return Ok(Some(deletes));
    }
    let first = data.first().map(|p| store.id_of(p));
    match (mode, first) {
        (_, None) => Ok(Some(
            existing
                .iter()
                .map(|m| m.location.clone())
                .filter(|p| our_temp(p))
                .collect(),
        )),
        (Mode::Error, Some(first)) => Err(ParquetError::Invalid {
            key: "target.path".into(),
            message: format!(
                "{} already holds {} Parquet file(s) (first: {first}); mode error (the default) refuses to write there: set target.mode to overwrite, append or ignore",
                store.location,
                data.len()
            ),
        }),
        (Mode::Ignore, Some(first)) => {
            tracing::info!(
                "{} already holds Parquet files (first: {first}); mode ignore: nothing is written",
                store.location
            );
            Ok(None)
        }
        (Mode::Overwrite, Some(_)) => {
            tracing::info!(
                "mode overwrite: the {} object(s) under {} will be deleted when the export starts",
                existing.len(),
                store.location
            );
            Ok(Some(existing.into_iter().map(|m| m.location).collect()))
        }
        (Mode::Append, Some(_)) => {
            if let Some(p) = data.iter().find(|p| ours(p)) {
                return Err(ParquetError::Invalid {
                    key: "target.mode".into(),
                    message: format!(
                        "append: {} already holds an export of this table ({}), whose files this one would replace; use overwrite, or another path",
                        store.location,
                        store.id_of(p)
                    ),
                });
            }
            Ok(Some(Vec::new()))
        }
    }
}

/// Writes rows of a CQL scan to Parquet files, one per unit.
pub struct ParquetSink {
    files: Arc<UnitFiles<ParquetFiles>>,
    deletes: Mutex<Vec<ObjPath>>,
}

/// How the files of an export are named and encoded (shared with the blocking tasks that
/// write them).
pub struct ParquetFiles {
    schema: SchemaRef,
    types: Vec<ColumnType<'static>>,
    props: parquet::file::properties::WriterPropertiesBuilder,
    tag: String,
    extension: &'static str,
}

impl ParquetFiles {
    fn final_name(&self, key: &str) -> String {
        format!(
            "part-{}-{:016x}{}.parquet",
            self.tag,
            xxhash_rust::xxh3::xxh3_64(key.as_bytes()),
            self.extension
        )
    }

    fn batch(&self, rows: &[RawRow]) -> Result<RecordBatch, String> {
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.types.len());
        for (i, t) in self.types.iter().enumerate() {
            let cells: Vec<Option<&[u8]>> = rows.iter().map(|r| r.cells[i].as_deref()).collect();
            let field = self.schema.field(i);
            let a =
                encode::array(&cells, t).map_err(|e| format!("column {:?}: {e}", field.name()))?;
            arrays.push(a);
        }
        RecordBatch::try_new(self.schema.clone(), arrays).map_err(|e| e.to_string())
    }
}

impl FileFormat for ParquetFiles {
    type Piece = RawRow;
    type Encoded = RecordBatch;
    type Writer = ArrowWriter<std::fs::File>;
    type Closed = ();

    fn open(&self, file: std::fs::File, unit: &UnitInfo) -> Result<Self::Writer, String> {
        let props = self
            .props
            .clone()
            .set_key_value_metadata(Some(vec![
                KeyValue::new(READ_AT_KEY.into(), unit.began_millis.to_string()),
                KeyValue::new(RANGES_KEY.into(), unit.key.clone()),
            ]))
            .build();
        ArrowWriter::try_new(file, self.schema.clone(), Some(props)).map_err(|e| e.to_string())
    }

    fn encode(&self, rows: Vec<RawRow>) -> Result<RecordBatch, String> {
        self.batch(&rows)
    }

    fn write(&self, writer: &mut Self::Writer, batch: RecordBatch) -> Result<(), String> {
        writer.write(&batch).map_err(|e| e.to_string())?;
        if writer.in_progress_size() > ROW_GROUP_BYTES {
            writer.flush().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn close(&self, writer: Self::Writer) -> Result<(std::fs::File, ()), String> {
        Ok((writer.into_inner().map_err(|e| e.to_string())?, ()))
    }
}

impl From<FileError> for ParquetError {
    fn from(e: FileError) -> Self {
        ParquetError::Write {
            file: e.file,
            message: e.message,
        }
    }
}

impl Sink<RawRow> for ParquetSink {
    type Request = UnitRequest<ParquetFiles>;
    type Error = ParquetError;
    type Batcher = UnitBatch<ParquetFiles>;

    async fn start(&self) -> Result<(), ParquetError> {
        let deletes = std::mem::take(&mut *self.deletes.lock().unwrap_or_else(|p| p.into_inner()));
        self.files
            .delete_all(deletes)
            .await
            .map_err(|message| ParquetError::Store {
                side: "target",
                message,
            })
    }

    fn begin(&self, unit: &str) -> Self::Batcher {
        self.files.begin(unit)
    }

    fn push(
        &self,
        b: &mut Self::Batcher,
        row: &RawRow,
        _read_at: Instant,
        out: &mut Vec<Self::Request>,
    ) -> Result<Pushed, Refused> {
        b.push(row.clone(), row.size() as u64, ROWS_PER_REQUEST, out);
        Ok(Pushed::Written)
    }

    fn flush(&self, b: &mut Self::Batcher, out: &mut Vec<Self::Request>) {
        b.take(out);
    }

    async fn send(&self, request: &Self::Request) -> Result<(), ParquetError> {
        let name = self.files.format.final_name(&request.unit().key);
        Ok(self.files.append(&name, request).await?)
    }

    async fn finish(&self, batcher: Self::Batcher) -> Result<(), ParquetError> {
        // No row in this unit: no file.
        let name = self.files.format.final_name(&batcher.unit().key);
        self.files.place(batcher, &name).await?;
        Ok(())
    }
}
