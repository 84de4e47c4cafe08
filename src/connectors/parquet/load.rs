//! Parquet → CQL: each Parquet file is a unit, read row group by row group in pages of
//! `batchSize` rows and written through the CQL connector's writer, then recorded in
//! `skipParquetFiles` (with its size, modification time and ETag) once every write of it was
//! acknowledged.
//!
//! Before anything is written every file's footer is read and each of its columns matched to
//! the target table (after `renames`) and checked convertible, so an impossible conversion
//! fails the job naming the file and column. The files are described to the CQL writer as a
//! table whose columns are the target's, named as in the files; ScyllaDB Migrator's
//! `__migrator_meta_<column>_writetime`/`_ttl` columns become the writetime and TTL of their
//! column's cells.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_schema::DataType;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderBuilder, ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::async_reader::ParquetRecordBatchStream;
use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType};

use super::config::ParquetSource;
use super::store::{FileEntry, FileReader, Store, normalize_id};
use super::{META_PREFIX, ParquetError, READ_AT_KEY, decode};
use crate::connectors::cql::copy::CopyPlan;
use crate::connectors::cql::rows::RawRow;
use crate::connectors::cql::schema::{self, Column, TableSchema};
use crate::connectors::cql::transfer::CopySink;
use crate::connectors::cql::{self, CqlTarget};
use crate::connectors::seam::SeamError;
use crate::connectors::seam::{Pacing, Page, Plan, Retry, Scan, Unit};
use crate::jobfile::{Rename, SavepointsConfig};
use crate::savepoints;

/// Footers read at once while planning.
const FOOTERS_AT_ONCE: usize = 16;
/// The most files one load reads: each file's footer is held for the whole job (and each
/// finished one named in every savepoint).
pub const MAX_FILES: usize = 100_000;

/// A column of the rows handed to the CQL writer, as one file has it.
#[derive(Debug, Clone)]
struct Slot {
    /// The file's column (`None`: the file does not have it, the cell is null).
    column: Option<String>,
    /// The CQL type it is converted to.
    typ: ColumnType<'static>,
}

/// A file to load, with what its footer says.
pub struct LoadFile {
    entry: FileEntry,
    index: usize,
    meta: ArrowReaderMetadata,
    rows_per_group: Vec<usize>,
    slots: Vec<Slot>,
    mask: ProjectionMask,
    /// When its rows were read from their source (drover's exports), for TTLs.
    read_at_millis: Option<i64>,
}

/// One file of a load.
#[derive(Clone)]
pub struct FileUnit {
    file: Arc<LoadFile>,
    tracking: bool,
}

impl std::fmt::Display for FileUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.file.entry.id)
    }
}

impl Unit for FileUnit {
    fn record(&self, done: &mut savepoints::Progress) {
        // ScyllaDB Migrator's legacy mode: files are not tracked, a re-run reads them all.
        if self.tracking {
            let e = &self.file.entry;
            done.names_mut(&super::FILES).insert(e.id.clone());
            done.versions_mut(&super::VERSIONS)
                .insert(e.id.clone(), e.version.clone());
        }
    }
}

/// Where a page of a file starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    row_group: usize,
    row: usize,
}

struct OpenReader {
    at: Position,
    batches: Batches,
}

/// Where a file's pages come from. A local file is read page by page by the synchronous
/// reader (memory: a page per column); the async reader, needed for object stores, fetches
/// each row group's column chunks whole, so an S3 load is paced by row group size instead
/// (see [`MEMORY_BUDGET`]).
enum Batches {
    Local(Box<ParquetRecordBatchReader>),
    Remote(ParquetRecordBatchStream<FileReader>),
}

/// Bytes of row groups an S3 load holds at once, at most (with one file at a time, a single
/// row group larger than this still loads).
const MEMORY_BUDGET: u64 = 512 * 1024 * 1024;

/// Parquet files read as units.
pub struct ParquetScan {
    store: Store,
    files: Vec<Arc<LoadFile>>,
    batch_size: usize,
    tracking: bool,
    options: decode::Options,
    /// Column index of the first writetime/TTL pair among the slots, and of the data column
    /// of each pair.
    meta: Option<(usize, Vec<usize>)>,
    /// Streams left open between pages, by file: a page at the position a stream stands at
    /// continues it; any other (a retry) opens the file again there.
    open: Mutex<HashMap<usize, OpenReader>>,
}

/// Lists and checks the files, connects to the target and checks its table, and prepares
/// the writes. Nothing is written.
pub async fn open_load(
    src: &ParquetSource,
    dst: &CqlTarget,
    renames: &[Rename],
    savepoints: Option<&SavepointsConfig>,
) -> Result<(ParquetScan, CopySink, Pacing), SeamError> {
    let tracking = savepoints
        .and_then(|s| s.enable_parquet_file_tracking)
        .unwrap_or(true);
    if !tracking {
        tracing::info!(
            "savepoints.enableParquetFileTracking is false (ScyllaDB Migrator's legacy mode): finished files are not recorded, a re-run reads every file again"
        );
    }
    let store = Store::open("source", &src.location, &src.s3)?;
    let entries = store.parquet_files().await?;
    if entries.is_empty() {
        let why = match &store.local_root {
            Some(p) if !p.exists() => format!("{} does not exist", p.display()),
            _ => format!("no Parquet file (*.parquet) found in {}", src.location),
        };
        return Err(ParquetError::Invalid {
            key: "source.path".into(),
            message: why,
        }
        .into());
    }
    if entries.len() > MAX_FILES {
        return Err(ParquetError::Invalid {
            key: "source.path".into(),
            message: format!(
                "{} holds {} Parquet files; one job reads at most {MAX_FILES}: split it by prefix or directory",
                src.location,
                entries.len()
            ),
        }
        .into());
    }
    let footers: Vec<(FileEntry, ArrowReaderMetadata)> = futures::stream::iter(entries)
        .map(|entry| {
            let store = store.inner.clone();
            async move {
                let mut reader = FileReader::new(store, entry.path.clone(), entry.size);
                match ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new()).await
                {
                    Ok(meta) => Ok((entry, meta)),
                    Err(e) => Err(ParquetError::Invalid {
                        key: "source.path".into(),
                        message: format!("{}: not a readable Parquet file: {e}", entry.id),
                    }),
                }
            }
        })
        .buffered(FOOTERS_AT_ONCE)
        .try_collect()
        .await?;
    tracing::info!(
        "{} Parquet file(s) in {}, {} rows",
        footers.len(),
        src.location,
        footers
            .iter()
            .map(|(_, m)| m.metadata().file_metadata().num_rows())
            .sum::<i64>()
    );

    let session = cql::connect("target", &dst.endpoint).await?;
    cql::check_local_dc(&session, "target", dst.endpoint.local_dc.as_deref())?;
    let target = schema::load(
        &session,
        "target",
        &dst.endpoint.keyspace,
        &dst.endpoint.table,
    )
    .await?;
    let shape = match match_columns(&footers, &target, renames) {
        Err(ParquetError::Mismatch(mut mismatch)) if mismatch.needs_recreate() => {
            // The statement keeps the target's keys and clustering order (which the driver's
            // metadata does not hold), with the files' columns in the types a load writes.
            let descending = schema::clustering_order(&session, "target", &target).await;
            mismatch.create = recreate(&footers, &target, renames, descending.as_deref().ok());
            return Err(ParquetError::Mismatch(mismatch).into());
        }
        other => other?,
    };
    let preserve = shape.preserve && !target.is_counter_table();
    if shape.preserve && !preserve {
        tracing::info!("writetime and TTL columns are not used: the target is a counter table");
    }
    // A row without its key cannot be written anywhere: it is counted (rowsDropped) and left
    // out, not retried.
    let mut dst = dst.clone();
    dst.drop_null_primary_keys = true;
    let plan = CopyPlan::prepare_writes(
        &session,
        &dst,
        shape.table.clone(),
        target,
        &shape.mapping,
        preserve,
    )
    .await?;
    let (files, meta) = layouts(footers, &shape.table, preserve);
    let scan = ParquetScan {
        store,
        files,
        batch_size: src.batch_size,
        tracking,
        options: decode::Options {
            truncate_timestamps: src.truncate_timestamps,
            null_elements: false,
        },
        meta,
        open: Mutex::new(HashMap::new()),
    };
    let sink = CopySink::new(Arc::new(session), Arc::new(plan));
    let mut units_at_once = src.max_concurrent_files;
    if scan.store.local_root.is_none() {
        let largest = scan
            .files
            .iter()
            .flat_map(|f| f.meta.metadata().row_groups().iter())
            .map(|rg| u64::try_from(rg.compressed_size()).unwrap_or(0))
            .max()
            .unwrap_or(0);
        let fit = usize::try_from(MEMORY_BUDGET / largest.max(1))
            .unwrap_or(usize::MAX)
            .max(1);
        if fit < units_at_once {
            tracing::info!(
                "row groups of up to {largest} bytes are read whole from S3: {fit} file(s) at once instead of {units_at_once}, to hold at most {MEMORY_BUDGET} bytes"
            );
            units_at_once = fit;
        }
    }
    let pacing = Pacing {
        units_finishing: 0,
        units_at_once,
        requests_in_flight: dst.max_in_flight,
        rows_per_second: dst.rows_per_second,
        bytes_per_second: dst.bytes_per_second,
    };
    Ok((scan, sink, pacing))
}

/// The files described as one table.
struct Shape {
    /// The target's columns that some file has, named as in the files.
    table: TableSchema,
    /// File column name → target column name.
    mapping: HashMap<String, String>,
    /// Whether some file carries writetimes or TTLs.
    preserve: bool,
}

fn meta_base(name: &str) -> Option<(&str, bool)> {
    let rest = name.strip_prefix(META_PREFIX)?;
    if let Some(base) = rest.strip_suffix("_writetime") {
        Some((base, true))
    } else {
        rest.strip_suffix("_ttl").map(|base| (base, false))
    }
}

fn meta_type(arrow: &DataType, writetime: bool) -> ColumnType<'static> {
    let scalar = ColumnType::Native(if writetime {
        NativeType::BigInt
    } else {
        NativeType::Int
    });
    match arrow {
        DataType::List(_) | DataType::LargeList(_) => ColumnType::Collection {
            frozen: false,
            typ: CollectionType::List(Box::new(scalar)),
        },
        _ => scalar,
    }
}

/// The CQL type to add a column of for a Parquet column of type `arrow`, when a plain one
/// takes it exactly (checked as a load checks it).
fn suggested_type(arrow: &DataType) -> Option<String> {
    suggested_cql(arrow).map(|typ| schema::type_name(&typ))
}

/// [`suggested_type`] as a type.
fn suggested_cql(arrow: &DataType) -> Option<ColumnType<'static>> {
    use NativeType as N;
    let native = match arrow {
        DataType::Boolean => N::Boolean,
        DataType::Int8 => N::TinyInt,
        DataType::Int16 => N::SmallInt,
        DataType::Int32 => N::Int,
        DataType::Int64 => N::BigInt,
        DataType::Float32 => N::Float,
        DataType::Float64 => N::Double,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => N::Text,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => N::Blob,
        DataType::Date32 | DataType::Date64 => N::Date,
        DataType::Timestamp(..) => N::Timestamp,
        DataType::Decimal128(..) | DataType::Decimal256(..) => N::Decimal,
        _ => return None,
    };
    let typ = ColumnType::Native(native);
    decode::check(arrow, &typ).ok().map(|()| typ)
}

/// `CREATE TABLE` for a target that takes the files' columns, for an answer whose problems
/// need `target` recreated: every data column of the files (after renames, in the order they
/// first appear) in the CQL type [`suggested_type`] gives it, keyed and ordered as `target`
/// (`descending`) is. `None` when a column has no such type (it must be left out of the files
/// first) or a key column of `target` is not in the files.
fn recreate(
    footers: &[(FileEntry, ArrowReaderMetadata)],
    target: &TableSchema,
    renames: &[Rename],
    descending: Option<&[bool]>,
) -> Option<String> {
    let mut columns: Vec<(String, ColumnType<'static>)> = Vec::new();
    for (_, meta) in footers {
        for f in meta.schema().fields() {
            if meta_base(f.name()).is_some() {
                continue;
            }
            let to = renames
                .iter()
                .find(|r| r.from == *f.name())
                .map_or(f.name().as_str(), |r| r.to.as_str());
            if columns.iter().all(|(n, _)| n != to) {
                columns.push((to.to_string(), suggested_cql(f.data_type())?));
            }
        }
    }
    let names = |cols: &[schema::Column]| cols.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    schema::create_for(
        &target.qualified(),
        &columns,
        (
            &names(&target.partition_key),
            &names(&target.clustering_key),
            &names(&target.statics),
        ),
        descending,
    )
}

fn match_columns(
    footers: &[(FileEntry, ArrowReaderMetadata)],
    target: &TableSchema,
    renames: &[Rename],
) -> Result<Shape, ParquetError> {
    let invalid = |message: String| ParquetError::Invalid {
        key: "source.path".into(),
        message,
    };
    let to_target = |name: &str| -> String {
        renames
            .iter()
            .find(|r| r.from == name)
            .map_or(name, |r| r.to.as_str())
            .to_string()
    };
    let find = |name: &str| target.all().find(|c| c.name == name);
    let mut problems = schema::FileProblems::default();
    let mut mapping: HashMap<String, String> = HashMap::new();
    let mut preserve = false;
    let mut used_renames = HashSet::new();
    for (entry, meta) in footers {
        let fields = meta.schema().fields();
        for f in fields {
            let name = f.name();
            if let Some((base, writetime)) = meta_base(name) {
                let Some(data) = fields.iter().find(|d| d.name() == base) else {
                    return Err(invalid(format!(
                        "{}: column {name:?} holds the {} of a column {base:?} the file does not have",
                        entry.id,
                        if writetime { "writetimes" } else { "TTLs" }
                    )));
                };
                let Some(col) = find(&to_target(data.name())) else {
                    continue; // refused below, as a data column
                };
                if target
                    .partition_key
                    .iter()
                    .chain(&target.clustering_key)
                    .any(|k| k.name == col.name)
                {
                    return Err(invalid(format!(
                        "{}: column {name:?}: a primary key column has no writetime or TTL",
                        entry.id
                    )));
                }
                decode::check(f.data_type(), &meta_type(f.data_type(), writetime))
                    .map_err(|e| invalid(format!("{}: column {name:?}: {e}", entry.id)))?;
                preserve = true;
                continue;
            }
            let to = to_target(name);
            if to != *name {
                used_renames.insert(name.clone());
            }
            let renamed = if to == *name {
                String::new()
            } else {
                format!(" (renamed to {to:?})")
            };
            let Some(col) = find(&to) else {
                let fix = suggested_type(f.data_type()).map_or_else(
                    || "no CQL type takes it exactly: leave it out of the files".to_string(),
                    |typ| {
                        format!(
                            "ALTER TABLE {} ADD {} {typ};",
                            target.qualified(),
                            schema::quote(&to)
                        )
                    },
                );
                problems.add(
                    &entry.id,
                    format!("column {name:?}{renamed} is not a column of the target table"),
                    Some(fix),
                );
                continue;
            };
            if let Err(e) = decode::check(f.data_type(), &col.typ) {
                problems.add(&entry.id, format!("column {name:?}{renamed}: {e}"), None);
                continue;
            }
            if let Some(other) = mapping.iter().find(|(k, v)| **v == to && *k != name) {
                problems.add(
                    &entry.id,
                    format!(
                        "columns {:?} and {name:?} would both be written to the target column {to:?}",
                        other.0
                    ),
                    Some("rename one of them to another column (renames)".into()),
                );
                continue;
            }
            mapping.insert(name.clone(), to);
        }
        for key in target.partition_key.iter().chain(&target.clustering_key) {
            if !fields
                .iter()
                .any(|f| meta_base(f.name()).is_none() && to_target(f.name()) == key.name)
            {
                problems.add(
                    &entry.id,
                    format!(
                        "no column for the target's primary key column {:?}",
                        key.name
                    ),
                    None,
                );
            }
        }
    }
    if !problems.list.is_empty() {
        return Err(ParquetError::Mismatch(Box::new(schema::Mismatch {
            target: target.qualified(),
            source: "the Parquet files".into(),
            problems: problems.list,
            create: None,
        })));
    }
    for r in renames {
        if !used_renames.contains(&r.from) {
            tracing::warn!(
                "renames: no Parquet file has a column {:?}; the rename does nothing",
                r.from
            );
        }
    }
    Ok(Shape {
        table: target.named_by(&mapping),
        mapping,
        preserve,
    })
}

type Layouts = (Vec<Arc<LoadFile>>, Option<(usize, Vec<usize>)>);

fn layouts(
    footers: Vec<(FileEntry, ArrowReaderMetadata)>,
    table: &TableSchema,
    preserve: bool,
) -> Layouts {
    let data: Vec<&Column> = table.all().collect();
    let first_meta = data.len();
    let timed: Vec<usize> =
        (table.partition_key.len() + table.clustering_key.len()..data.len()).collect();
    let files = footers
        .into_iter()
        .enumerate()
        .map(|(index, (entry, meta))| {
            let schema = meta.schema().clone();
            let has = |name: &str| schema.field_with_name(name).ok();
            let mut slots: Vec<Slot> = data
                .iter()
                .map(|c| Slot {
                    column: has(&c.name).map(|f| f.name().clone()),
                    typ: c.typ.clone(),
                })
                .collect();
            if preserve {
                for &i in &timed {
                    for writetime in [true, false] {
                        let name = format!(
                            "{META_PREFIX}{}_{}",
                            data[i].name,
                            if writetime { "writetime" } else { "ttl" }
                        );
                        let field = has(&name);
                        slots.push(Slot {
                            typ: field.map_or_else(
                                || meta_type(&DataType::Null, writetime),
                                |f| meta_type(f.data_type(), writetime),
                            ),
                            column: field.map(|f| f.name().clone()),
                        });
                    }
                }
            }
            let roots: Vec<usize> = slots
                .iter()
                .filter_map(|s| s.column.as_deref())
                .filter_map(|n| schema.index_of(n).ok())
                .collect();
            let mask = ProjectionMask::roots(meta.parquet_schema(), roots);
            let md = meta.metadata();
            let read_at_millis = md
                .file_metadata()
                .key_value_metadata()
                .and_then(|kv| kv.iter().find(|k| k.key == READ_AT_KEY))
                .and_then(|k| k.value.as_deref()?.parse().ok());
            Arc::new(LoadFile {
                rows_per_group: md
                    .row_groups()
                    .iter()
                    .map(|rg| usize::try_from(rg.num_rows()).unwrap_or(0))
                    .collect(),
                entry,
                index,
                meta,
                slots,
                mask,
                read_at_millis,
            })
        })
        .collect();
    (files, preserve.then_some((first_meta, timed)))
}

impl ParquetScan {
    fn open_at(&self, file: &LoadFile, at: Position) -> Result<OpenReader, ParquetError> {
        let fail = |e| read_error(file, at.row_group, "cannot open", e);
        let batches = if self.store.local_root.is_some() {
            let path = self.store.local_path(&file.entry.path);
            let local = std::fs::File::open(&path)
                .map_err(|e| fail(parquet::errors::ParquetError::External(Box::new(e))))?;
            let builder =
                ParquetRecordBatchReaderBuilder::new_with_metadata(local, file.meta.clone());
            let reader = self.positioned(builder, file, at).build().map_err(fail)?;
            Batches::Local(Box::new(reader))
        } else {
            let reader = FileReader::new(
                self.store.inner.clone(),
                file.entry.path.clone(),
                file.entry.size,
            );
            let builder =
                ParquetRecordBatchStreamBuilder::new_with_metadata(reader, file.meta.clone());
            let stream = self.positioned(builder, file, at).build().map_err(fail)?;
            Batches::Remote(stream)
        };
        Ok(OpenReader { at, batches })
    }

    /// `builder` set to read `file` from `at` on, in pages of `batchSize` rows of the columns
    /// the job uses.
    fn positioned<T>(
        &self,
        builder: ArrowReaderBuilder<T>,
        file: &LoadFile,
        at: Position,
    ) -> ArrowReaderBuilder<T> {
        builder
            .with_row_groups((at.row_group..file.rows_per_group.len()).collect())
            .with_offset(at.row)
            .with_batch_size(self.batch_size)
            .with_projection(file.mask.clone())
    }

    /// The next batch of an open reader; a local file's is decoded off the async runtime.
    async fn next_batch(
        mut reader: OpenReader,
    ) -> (
        OpenReader,
        Option<Result<RecordBatch, parquet::errors::ParquetError>>,
    ) {
        let batch = match &mut reader.batches {
            Batches::Remote(stream) => stream.next().await,
            Batches::Local(_) => {
                return tokio::task::spawn_blocking(move || {
                    let Batches::Local(local) = &mut reader.batches else {
                        unreachable!("matched above")
                    };
                    let batch = local
                        .next()
                        .map(|b| b.map_err(parquet::errors::ParquetError::from));
                    (reader, batch)
                })
                .await
                .expect("decoding a page does not panic");
            }
        };
        (reader, batch)
    }

    fn advance(file: &LoadFile, mut at: Position, rows: usize) -> Option<Position> {
        at.row += rows;
        while at.row_group < file.rows_per_group.len()
            && at.row >= file.rows_per_group[at.row_group]
        {
            at.row -= file.rows_per_group[at.row_group];
            at.row_group += 1;
        }
        (at.row_group < file.rows_per_group.len()).then_some(at)
    }

    fn rows(
        &self,
        file: &LoadFile,
        batch: &RecordBatch,
        row_group: usize,
    ) -> Result<Vec<RawRow>, ParquetError> {
        let n = batch.num_rows();
        let mut columns: Vec<Vec<Option<Bytes>>> = Vec::with_capacity(file.slots.len());
        let first_meta = self.meta.as_ref().map_or(usize::MAX, |(first, _)| *first);
        for (index, slot) in file.slots.iter().enumerate() {
            let Some(name) = &slot.column else {
                columns.push(vec![None; n]);
                continue;
            };
            let array = batch
                .column_by_name(name)
                .ok_or_else(|| ParquetError::Read {
                    file: file.entry.id.clone(),
                    row_group,
                    message: format!("column {name:?} is missing from a page"),
                    retry: Retry::Never,
                })?;
            columns.push(
                decode::column_guarded(
                    array,
                    &slot.typ,
                    decode::Options {
                        null_elements: index >= first_meta,
                        ..self.options
                    },
                )
                .map_err(|e| ParquetError::Read {
                    file: file.entry.id.clone(),
                    row_group,
                    message: format!("column {name:?}: {e}"),
                    retry: Retry::Never,
                })?,
            );
        }
        if let (Some((first, timed)), Some(read_at)) = (&self.meta, file.read_at_millis) {
            let age = (chrono::Utc::now().timestamp_millis() - read_at).max(0) / 1000;
            for (pair, &data) in timed.iter().enumerate() {
                let ttl = first + 2 * pair + 1;
                #[allow(clippy::needless_range_loop)] // three columns of one row change together
                for row in 0..n {
                    if expire(&mut columns[ttl][row], age) {
                        // Expired since it was read: the source holds nothing for it either.
                        columns[data][row] = None;
                        columns[ttl - 1][row] = None;
                    }
                }
            }
        }
        Ok((0..n)
            .map(|i| RawRow {
                cells: columns.iter().map(|c| c[i].clone()).collect(),
            })
            .collect())
    }
}

/// Shortens a TTL cell (an int, or a list of ints for a collection's elements) by `age`
/// seconds; true when a single TTL has run out. An element's TTL is kept at least 1 s: its
/// value is gone within a second, as in the source.
fn expire(cell: &mut Option<Bytes>, age: i64) -> bool {
    let Some(v) = cell else { return false };
    if v.len() == 4 {
        let ttl = i64::from(i32::from_be_bytes(v[..].try_into().expect("4 bytes")));
        if ttl <= 0 {
            return false;
        }
        let left = ttl - age;
        if left <= 0 {
            return true;
        }
        *cell = Some(Bytes::copy_from_slice(&(left as i32).to_be_bytes()));
        return false;
    }
    let Some(items) = crate::connectors::cql::codec::read_int_list(&Some(v.clone())) else {
        return false;
    };
    let mut out = (items.len() as i32).to_be_bytes().to_vec();
    for item in items {
        match item {
            Some(t) if t > 0 => {
                out.extend_from_slice(&4i32.to_be_bytes());
                out.extend_from_slice(&((t - age).max(1) as i32).to_be_bytes());
            }
            Some(t) => {
                out.extend_from_slice(&4i32.to_be_bytes());
                out.extend_from_slice(&(t as i32).to_be_bytes());
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    *cell = Some(Bytes::from(out));
    false
}

fn read_error(
    file: &LoadFile,
    row_group: usize,
    what: &str,
    e: parquet::errors::ParquetError,
) -> ParquetError {
    // Errors of the object store come wrapped as External: reading again may succeed. The
    // rest is the file's content, which will not change.
    let retry = if matches!(e, parquet::errors::ParquetError::External(_)) {
        Retry::Safe
    } else {
        Retry::Never
    };
    ParquetError::Read {
        file: file.entry.id.clone(),
        row_group,
        message: format!("{what}: {e}"),
        retry,
    }
}

impl Scan for ParquetScan {
    type Unit = FileUnit;
    type Row = RawRow;
    type Cursor = Position;
    type Error = ParquetError;

    fn plan(&self, done: &savepoints::Progress) -> Plan<FileUnit> {
        let finished: HashSet<String> = done
            .names(&super::FILES)
            .iter()
            .map(|f| normalize_id(f))
            .collect();
        let versions: HashMap<String, &String> = done
            .versions(&super::VERSIONS)
            .iter()
            .map(|(k, v)| (normalize_id(k), v))
            .collect();
        let mut plan = Plan {
            total: self.files.len() as u64,
            skipped: 0,
            work: Vec::new(),
        };
        for file in &self.files {
            let id = normalize_id(&file.entry.id);
            if self.tracking && finished.contains(&id) {
                match versions.get(&id) {
                    Some(v) if **v != file.entry.version => tracing::warn!(
                        "{} changed since it was loaded ({v}, now {}): it is read again",
                        file.entry.id,
                        file.entry.version
                    ),
                    _ => {
                        plan.skipped += 1;
                        continue;
                    }
                }
            }
            plan.work.push(FileUnit {
                file: file.clone(),
                tracking: self.tracking,
            });
        }
        plan
    }

    fn start(&self, _unit: &FileUnit) -> Position {
        Position {
            row_group: 0,
            row: 0,
        }
    }

    /// The files' footers: exact row counts, and the row groups' uncompressed sizes.
    async fn expect(&self, work: &[FileUnit]) -> Vec<Option<crate::connectors::seam::Expected>> {
        work.iter()
            .map(|unit| {
                let groups = unit.file.meta.metadata().row_groups();
                Some(crate::connectors::seam::Expected {
                    count: unit.file.rows_per_group.iter().sum::<usize>() as f64,
                    bytes: groups
                        .iter()
                        .map(|g| g.total_byte_size().max(0) as f64)
                        .sum(),
                    exact: true,
                })
            })
            .collect()
    }

    async fn page(
        &self,
        unit: &FileUnit,
        at: &Position,
    ) -> Result<Page<RawRow, Position>, ParquetError> {
        let file = &unit.file;
        if file.rows_per_group.is_empty() {
            return Ok(Page {
                rows: Vec::new(),
                next: None,
                measured: None,
            });
        }
        let kept = self
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&file.index)
            .filter(|r| r.at == *at);
        let reader = match kept {
            Some(r) => r,
            None => self.open_at(file, *at)?,
        };
        let (mut reader, next) = Self::next_batch(reader).await;
        let batch = match next {
            None => {
                return Ok(Page {
                    rows: Vec::new(),
                    next: None,
                    measured: None,
                });
            }
            Some(Err(e)) => return Err(read_error(file, at.row_group, "cannot read", e)),
            Some(Ok(b)) => b,
        };
        let rows = self.rows(file, &batch, at.row_group)?;
        let next = Self::advance(file, *at, batch.num_rows());
        if let Some(next) = next {
            reader.at = next;
            self.open
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(file.index, reader);
        }
        Ok(Page {
            rows,
            next,
            measured: None,
        })
    }

    fn row_size(row: &RawRow) -> usize {
        row.size()
    }
}
