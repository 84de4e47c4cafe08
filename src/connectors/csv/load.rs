//! CSV → CQL: each CSV file is a unit, streamed — downloaded and parsed record by record in a
//! blocking task, a page of `batchSize` rows at a time — and written through the CQL
//! connector's writer, then recorded in `skipCsvFiles` (with its size, modification time and
//! ETag) once every write of it was acknowledged. A file stopped half way is read again from
//! its start (the same values are written again).
//!
//! Before anything is written every file's header is read and each field matched to the
//! target table (after `renames`): a field that names no column, a missing primary key
//! column, two fields for one column are all reported at once, with the CQL that fixes each
//! where one does. DSBulk's `writetime(col)` and `ttl(col)` fields become the writetime and
//! TTL of their column's cells. As in DSBulk, an unquoted empty field is null (left unset: no
//! tombstone) and a quoted one (`""`) is the empty string for text and blob columns, null for
//! the others; with `nullValue` set, an unquoted field of that text is null too.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, ObjectStoreExt};
use scylla::cluster::metadata::{ColumnType, NativeType};

use super::Format;
use super::config::{CsvSource, DocumentMode};
use super::record::{Field, Parser, Record};
use super::{CsvError, codec};
use crate::connectors::cql::copy::CopyPlan;
use crate::connectors::cql::rows::RawRow;
use crate::connectors::cql::schema::{self, Column, TableSchema};
use crate::connectors::cql::transfer::CopySink;
use crate::connectors::cql::{self, CqlTarget};
use crate::connectors::parquet::store::{FileEntry, Store, normalize_id};
use crate::connectors::seam::SeamError;
use crate::connectors::seam::{Expected, Pacing, Page, Plan, Retry, Scan, Unit};
use crate::connectors::streamed::{PageSender, Streams};
use crate::jobfile::Rename;
use crate::savepoints;

mod array;

use array::ArrayObjects;

/// Headers read at once while planning.
const HEADERS_AT_ONCE: usize = 16;
/// The most files one load reads: each file's header is held for the whole job (and each
/// finished one named in every savepoint).
pub const MAX_FILES: usize = 100_000;
/// The longest line of a JSON file (one object): a record is held whole while it is read.
const MAX_JSON_LINE: usize = 64 * 1024 * 1024;
/// Bytes read from a file at a time.
const CHUNK: usize = 256 * 1024;
/// Bytes of rows per page, at most (about): a page ends at `batchSize` rows or these bytes,
/// whichever comes first, so wide rows do not make pages of `batchSize` times their size.
const PAGE_BYTES: usize = 4 * 1024 * 1024;

/// A field of a file's records, as the rows handed to the CQL writer place it.
#[derive(Debug, Clone)]
enum Slot {
    /// A column's value, of this type.
    Value(usize, ColumnType<'static>),
    /// A writetime (microseconds, written as a bigint).
    Writetime(usize),
    /// A TTL (seconds, written as an int).
    Ttl(usize),
    /// Nothing the target takes (never: every field is matched or the job refused).
    Skip,
}

/// What a header says: where each field of the records goes. Files of one header (those of
/// one unload) share theirs.
#[derive(Debug)]
struct Layout {
    /// The header's names.
    header: Arc<Vec<String>>,
    /// One slot per field, in field order.
    slots: Vec<Slot>,
}

/// A file to load, with what its header says.
#[derive(Debug)]
pub struct LoadFile {
    entry: FileEntry,
    layout: Arc<Layout>,
}

/// Where a row's cells are: the table's columns (partition key, clustering key, statics,
/// regular columns), then, with writetimes, a writetime and a TTL per static and regular
/// column — the layout of a CQL scan's rows.
#[derive(Debug, Clone, Copy)]
struct RowShape {
    width: usize,
    /// Cells of values (the rest are writetimes and TTLs).
    data: usize,
    partition: usize,
    keys: usize,
    statics_end: usize,
}

/// One file of a load.
#[derive(Clone)]
pub struct FileUnit {
    file: Arc<LoadFile>,
}

impl std::fmt::Display for FileUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.file.entry.id)
    }
}

impl Unit for FileUnit {
    fn record(&self, done: &mut savepoints::Progress) {
        let e = &self.file.entry;
        done.names_mut(&super::FILES).insert(e.id.clone());
        done.versions_mut(&super::VERSIONS)
            .insert(e.id.clone(), e.version.clone());
    }
}

/// CSV files read as units.
pub struct CsvScan {
    store: Arc<dyn ObjectStore>,
    files: Vec<Arc<LoadFile>>,
    source: CsvSource,
    shape: RowShape,
    /// For JSON, where each key of an object goes (objects of one file need not share their
    /// keys).
    keys: Arc<HashMap<String, Slot>>,
    open: Streams<RawRow, CsvError>,
}

fn invalid(message: String) -> CsvError {
    CsvError::Invalid {
        key: "source.path".into(),
        message,
    }
}

/// Lists the files and reads their headers, connects to the target and checks its table, and
/// prepares the writes. Nothing is written.
pub async fn open_load(
    src: &CsvSource,
    dst: &CqlTarget,
    renames: &[Rename],
) -> Result<(CsvScan, CopySink, Pacing), SeamError> {
    let store = Store::open("source", &src.location, &src.s3).map_err(CsvError::from)?;
    let all = store.list_all().await.map_err(CsvError::from)?;
    let single = all.len() == 1 && all[0].location == store.root;
    let entries: Vec<FileEntry> = all
        .into_iter()
        .filter(|m| {
            let name = m.location.filename().unwrap_or("");
            single
                || (name.ends_with(src.format.extension())
                    && !name.starts_with('_')
                    && !name.starts_with('.'))
        })
        .map(|m| FileEntry {
            id: store.id_of(&m.location),
            version: format!(
                "size={};mtime={};etag={}",
                m.size,
                m.last_modified.timestamp_millis(),
                m.e_tag.as_deref().unwrap_or("")
            ),
            path: m.location,
            size: m.size,
        })
        .collect();
    if entries.is_empty() {
        let why = match &store.local_root {
            Some(p) if !p.exists() => format!("{} does not exist", p.display()),
            _ => format!(
                "no {} file (*{}) found in {}",
                src.format.name().to_uppercase(),
                src.format.extension(),
                src.location
            ),
        };
        return Err(invalid(why).into());
    }
    if entries.len() > MAX_FILES {
        return Err(invalid(format!(
            "{} holds {} data files; one job reads at most {MAX_FILES}: split it by prefix or directory",
            src.location,
            entries.len()
        ))
        .into());
    }
    // Headers are kept once each, however many files share them.
    let mut distinct: HashMap<Vec<String>, Arc<Vec<String>>> = HashMap::new();
    let mut headers: Vec<(FileEntry, Arc<Vec<String>>)> = Vec::with_capacity(entries.len());
    let mut reads = futures::stream::iter(entries)
        .map(|entry| {
            let store = store.inner.clone();
            let source = src.clone();
            async move {
                let header = read_header(store, &entry, &source).await?;
                Ok::<_, CsvError>((entry, header))
            }
        })
        .buffered(HEADERS_AT_ONCE);
    while let Some((entry, header)) = reads.try_next().await? {
        let shared = distinct
            .entry(header)
            .or_insert_with_key(|h| Arc::new(h.clone()))
            .clone();
        headers.push((entry, shared));
    }
    drop(reads);
    let session = cql::connect("target", &dst.endpoint).await?;
    cql::check_local_dc(&session, "target", dst.endpoint.local_dc.as_deref())?;
    let target = schema::load(
        &session,
        "target",
        &dst.endpoint.keyspace,
        &dst.endpoint.table,
    )
    .await?;
    // A JSON file that is an empty array has no first object to check (and no rows).
    let checked: Vec<(FileEntry, Arc<Vec<String>>)> = headers
        .iter()
        .filter(|(_, h)| !h.is_empty())
        .cloned()
        .collect();
    let shape = match_fields(&checked, &target, renames)?;
    // A JSON object may hold any of the columns, whatever the first ones held: every column
    // of the target has its place, each with its writetime and TTL.
    let shape = match src.format {
        Format::Csv => shape,
        Format::Json => Shape {
            preserve: true,
            ..every_column(&target, renames)
        },
    };
    let preserve = shape.preserve && !target.is_counter_table();
    if shape.preserve && !preserve {
        tracing::info!("writetime and TTL fields are not used: the target is a counter table");
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
    let (files, row_shape) = layouts(headers, &shape.table, preserve);
    let keys: HashMap<String, Slot> = shape
        .table
        .all()
        .enumerate()
        .flat_map(|(i, c)| {
            let mut slots = vec![(c.name.clone(), Slot::Value(i, c.typ.clone()))];
            if preserve && i >= row_shape.keys {
                let pair = row_shape.data + 2 * (i - row_shape.keys);
                slots.push((format!("writetime({})", c.name), Slot::Writetime(pair)));
                slots.push((format!("ttl({})", c.name), Slot::Ttl(pair + 1)));
            }
            slots
        })
        .collect();
    tracing::info!(
        "{} CSV file(s) in {}, {} bytes",
        files.len(),
        src.location,
        files.iter().map(|f| f.entry.size).sum::<u64>()
    );
    let scan = CsvScan {
        store: store.inner,
        files,
        source: src.clone(),
        shape: row_shape,
        keys: Arc::new(keys),
        open: Streams::default(),
    };
    let sink = CopySink::new(Arc::new(session), Arc::new(plan));
    let pacing = Pacing {
        units_finishing: 0,
        units_at_once: src.max_concurrent_files,
        requests_in_flight: dst.max_in_flight,
        rows_per_second: dst.rows_per_second,
        bytes_per_second: dst.bytes_per_second,
    };
    Ok((scan, sink, pacing))
}

/// The first record of a file: its header.
async fn read_header(
    store: Arc<dyn ObjectStore>,
    entry: &FileEntry,
    src: &CsvSource,
) -> Result<Vec<String>, CsvError> {
    let got = store.get(&entry.path).await.map_err(|e| CsvError::Store {
        side: "source",
        message: format!("{}: {e}", entry.id),
    })?;
    let mut stream = got.into_stream();
    if src.format == Format::Json {
        return first_object_keys(&mut stream, entry, src.document_mode).await;
    }
    let mut parser = Parser::new(src.dialect.clone(), src.limits);
    let mut records = Vec::new();
    // Found before anything is written: the job is refused (400), naming the file.
    let bad = |message: String| CsvError::Invalid {
        key: "source.path".into(),
        message: format!("{}: {message}", entry.id),
    };
    while records.is_empty() {
        match stream.next().await {
            Some(Ok(chunk)) => parser
                .push(&chunk, &mut records)
                .map_err(|e| bad(e.to_string()))?,
            Some(Err(e)) => {
                return Err(CsvError::Read {
                    file: entry.id.clone(),
                    message: e.to_string(),
                    retry: Retry::Safe,
                });
            }
            None => {
                parser
                    .finish(&mut records)
                    .map_err(|e| bad(e.to_string()))?;
                break;
            }
        }
    }
    let Some(first) = records.into_iter().next() else {
        return Err(bad(
            "is empty: a CSV file starts with a header naming its columns".into(),
        ));
    };
    let mut seen = HashSet::new();
    let mut header = Vec::with_capacity(first.fields.len());
    for (i, f) in first.fields.into_iter().enumerate() {
        let name = f.text.trim().to_string();
        if name.is_empty() {
            return Err(bad(format!(
                "line {}: field {} of the header is empty; every field needs a column name",
                first.line,
                i + 1
            )));
        }
        if !seen.insert(name.clone()) {
            return Err(bad(format!(
                "line {}: the header names {name:?} twice",
                first.line
            )));
        }
        header.push(name);
    }
    Ok(header)
}

/// The keys of a JSON file's first object, which say which columns its objects hold; none
/// for a file that is an empty array. A file whose first byte other than whitespace is `[` is
/// one array of objects (DSBulk's `SINGLE_DOCUMENT`), any other one object per line; with
/// `documentMode` set, a file of the other layout is refused, naming the key.
async fn first_object_keys(
    stream: &mut (impl futures::Stream<Item = object_store::Result<Bytes>> + Unpin),
    entry: &FileEntry,
    mode: Option<DocumentMode>,
) -> Result<Vec<String>, CsvError> {
    let bad = |message: String| CsvError::Invalid {
        key: "source.path".into(),
        message: format!("{}: {message}", entry.id),
    };
    let broken = |e: object_store::Error| CsvError::Read {
        file: entry.id.clone(),
        message: e.to_string(),
        retry: Retry::Safe,
    };
    // Whitespace before the first byte that says the layout is dropped, its lines counted.
    let mut line: Vec<u8> = Vec::new();
    let mut number = 1u64;
    let first = loop {
        let blank = line.iter().take_while(|b| b.is_ascii_whitespace()).count();
        if blank < line.len() {
            number += line[..blank].iter().filter(|b| **b == b'\n').count() as u64;
            line.drain(..blank);
            break line[0];
        }
        number += line.iter().filter(|b| **b == b'\n').count() as u64;
        line.clear();
        match stream.next().await {
            Some(Ok(chunk)) => line.extend_from_slice(&chunk),
            Some(Err(e)) => return Err(broken(e)),
            None => {
                return Err(bad(
                    "is empty: a JSON file holds one object per line, or one array of objects"
                        .into(),
                ));
            }
        }
    };
    let found = if first == b'[' {
        DocumentMode::Single
    } else {
        DocumentMode::Multi
    };
    if let Some(mode) = mode.filter(|m| *m != found) {
        return Err(CsvError::Invalid {
            key: "source.documentMode".into(),
            message: format!(
                "{} is {} ({}), not {}; set documentMode to {}, or leave it out to read each file as it is",
                entry.id,
                match found {
                    DocumentMode::Single => "one JSON array of objects",
                    DocumentMode::Multi => "not a JSON array (its first character is not `[`)",
                },
                found.name(),
                mode.name(),
                found.name()
            ),
        });
    }
    let object = if found == DocumentMode::Single {
        let mut objects = ArrayObjects::new(MAX_JSON_LINE, number);
        let mut out = Vec::new();
        let mut chunk = Bytes::from(line);
        loop {
            objects
                .push(&chunk, &mut out)
                .map_err(|e| bad(e.to_string()))?;
            if let Some((at, text)) = out.into_iter().next() {
                number = at;
                break text;
            }
            out = Vec::new();
            match stream.next().await {
                Some(Ok(more)) => chunk = more,
                Some(Err(e)) => return Err(broken(e)),
                None => {
                    objects.finish().map_err(bad)?;
                    // An empty array: a file without rows, nothing to check.
                    return Ok(Vec::new());
                }
            }
        }
    } else {
        loop {
            if let Some(end) = line.iter().position(|b| *b == b'\n') {
                if line[..end].iter().all(u8::is_ascii_whitespace) {
                    line.drain(..=end);
                    number += 1;
                    continue;
                }
                line.truncate(end);
                break line;
            }
            if line.len() > MAX_JSON_LINE {
                return Err(bad(format!(
                    "line {number} is longer than {MAX_JSON_LINE} bytes"
                )));
            }
            match stream.next().await {
                Some(Ok(chunk)) => line.extend_from_slice(&chunk),
                Some(Err(e)) => return Err(broken(e)),
                None => break line,
            }
        }
    };
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&object)
        .map_err(|e| bad(format!("line {number}: not a JSON object: {e}")))?;
    Ok(object.keys().cloned().collect())
}

/// `writetime(col)` → (`col`, true), `ttl(col)` → (`col`, false), any case, as DSBulk names
/// them (a quoted name keeps its case: `writetime("Col")`).
fn meta_base(name: &str) -> Option<(String, bool)> {
    let lower = name.to_ascii_lowercase();
    let (inner, writetime) = if lower.starts_with("writetime(") {
        (&name["writetime(".len()..], true)
    } else if lower.starts_with("ttl(") {
        (&name["ttl(".len()..], false)
    } else {
        return None;
    };
    let inner = inner.strip_suffix(')')?.trim();
    let column = match inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => inner.to_string(),
    };
    Some((column, writetime))
}

/// The files described as one table.
struct Shape {
    /// The target's columns that some file has, named as in the files.
    table: TableSchema,
    /// File field name → target column name.
    mapping: HashMap<String, String>,
    /// Whether some file carries writetimes or TTLs.
    preserve: bool,
}

fn match_fields(
    headers: &[(FileEntry, Arc<Vec<String>>)],
    target: &TableSchema,
    renames: &[Rename],
) -> Result<Shape, CsvError> {
    let to_target = |name: &str| -> String {
        renames
            .iter()
            .find(|r| r.from == name)
            .map_or(name, |r| r.to.as_str())
            .to_string()
    };
    let find = |name: &str| target.all().find(|c| c.name == name);
    let is_key = |name: &str| {
        target
            .partition_key
            .iter()
            .chain(&target.clustering_key)
            .any(|k| k.name == name)
    };
    let mut problems = schema::FileProblems::default();
    let mut mapping: HashMap<String, String> = HashMap::new();
    let mut preserve = false;
    let mut used_renames = HashSet::new();
    let mut checked: HashSet<*const Vec<String>> = HashSet::new();
    for (entry, header) in headers {
        // Each header once (named by its first file): files of one unload share theirs.
        if !checked.insert(Arc::as_ptr(header)) {
            continue;
        }
        for name in header.iter() {
            if let Some((base, writetime)) = meta_base(name) {
                let what = if writetime { "writetime" } else { "TTL" };
                if !header.contains(&base) {
                    problems.add(
                        &entry.id,
                        format!("field {name:?} holds the {what} of a column {base:?} the file does not have"),
                        None,
                    );
                    continue;
                }
                let Some(col) = find(&to_target(&base)) else {
                    continue; // reported below, as a data field
                };
                if is_key(&col.name) {
                    problems.add(
                        &entry.id,
                        format!("field {name:?}: a primary key column has no {what}"),
                        None,
                    );
                } else if col.is_multi_cell() {
                    problems.add(
                        &entry.id,
                        format!(
                            "field {name:?}: column {:?} is a non-frozen collection or UDT, whose elements each have their own {what}; a load cannot give them one",
                            col.name
                        ),
                        None,
                    );
                } else {
                    preserve = true;
                }
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
            if find(&to).is_none() {
                problems.add(
                    &entry.id,
                    format!("field {name:?}{renamed} is not a column of the target table"),
                    Some(format!(
                        "ALTER TABLE {} ADD {} text;",
                        target.qualified(),
                        schema::quote(&to)
                    )),
                );
                continue;
            }
            if let Some(other) = mapping.iter().find(|(k, v)| **v == to && *k != name) {
                problems.add(
                    &entry.id,
                    format!(
                        "fields {:?} and {name:?} would both be written to the target column {to:?}",
                        other.0
                    ),
                    Some("rename one of them to another column (renames)".into()),
                );
                continue;
            }
            mapping.insert(name.clone(), to);
        }
        for key in target.partition_key.iter().chain(&target.clustering_key) {
            if !header
                .iter()
                .any(|h| meta_base(h).is_none() && to_target(h) == key.name)
            {
                problems.add(
                    &entry.id,
                    format!(
                        "no field for the target's primary key column {:?}",
                        key.name
                    ),
                    None,
                );
            }
        }
    }
    if !problems.list.is_empty() {
        return Err(CsvError::Mismatch(Box::new(schema::Mismatch {
            target: target.qualified(),
            source: "the CSV files".into(),
            problems: problems.list,
            create: None,
        })));
    }
    for r in renames {
        if !used_renames.contains(&r.from) {
            tracing::warn!(
                "renames: no CSV file has a field {:?}; the rename does nothing",
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

/// Every column of `target`, named as files name them (before `renames`).
fn every_column(target: &TableSchema, renames: &[Rename]) -> Shape {
    let mapping: HashMap<String, String> = target
        .all()
        .map(|c| {
            let file_name = renames
                .iter()
                .find(|r| r.to == c.name)
                .map_or(c.name.clone(), |r| r.from.clone());
            (file_name, c.name.clone())
        })
        .collect();
    Shape {
        table: target.named_by(&mapping),
        mapping,
        preserve: false,
    }
}

/// Each file's layout (one per distinct header), and where a row's cells are.
fn layouts(
    headers: Vec<(FileEntry, Arc<Vec<String>>)>,
    table: &TableSchema,
    preserve: bool,
) -> (Vec<Arc<LoadFile>>, RowShape) {
    let data: Vec<&Column> = table.all().collect();
    let keys = table.partition_key.len() + table.clustering_key.len();
    let shape = RowShape {
        width: if preserve {
            data.len() + 2 * (data.len() - keys)
        } else {
            data.len()
        },
        data: data.len(),
        partition: table.partition_key.len(),
        keys,
        statics_end: keys + table.statics.len(),
    };
    let slot = |name: &String| {
        if let Some((base, writetime)) = meta_base(name) {
            let Some(i) = data.iter().position(|c| c.name == base) else {
                return Slot::Skip;
            };
            if !preserve || i < keys {
                return Slot::Skip;
            }
            let pair = data.len() + 2 * (i - keys);
            return if writetime {
                Slot::Writetime(pair)
            } else {
                Slot::Ttl(pair + 1)
            };
        }
        data.iter()
            .position(|c| c.name == *name)
            .map_or(Slot::Skip, |i| Slot::Value(i, data[i].typ.clone()))
    };
    let mut made: HashMap<*const Vec<String>, Arc<Layout>> = HashMap::new();
    let files = headers
        .into_iter()
        .map(|(entry, header)| {
            let layout = made
                .entry(Arc::as_ptr(&header))
                .or_insert_with(|| {
                    Arc::new(Layout {
                        slots: header.iter().map(slot).collect(),
                        header: header.clone(),
                    })
                })
                .clone();
            Arc::new(LoadFile { entry, layout })
        })
        .collect();
    (files, shape)
}

/// Whether an empty quoted field (`""`) is a value of type `t` (text and blobs) rather than
/// null, as DSBulk reads it.
fn empty_is_a_value(t: &ColumnType<'_>) -> bool {
    matches!(
        t,
        ColumnType::Native(NativeType::Text | NativeType::Ascii | NativeType::Blob)
    )
}

/// One record as a row of cells placed as `shape` says; an unquoted field equal to
/// `null_value` (`nullValue`, when set) is null, as an empty one is.
fn to_row(
    layout: &Layout,
    record: &Record,
    shape: RowShape,
    (null_value, forms): (&str, &codec::Forms),
) -> Result<RawRow, String> {
    if record.fields.len() != layout.slots.len() {
        return Err(format!(
            "line {}: {} field(s), but the header has {}",
            record.line,
            record.fields.len(),
            layout.slots.len()
        ));
    }
    let null = |f: &Field| f.is_null(null_value);
    // A row of a partition's statics only (no clustering value, no regular value), as an
    // unload writes one: its clustering fields stay null, never the empty value below.
    let statics_only = shape.partition < shape.keys
        && layout
            .slots
            .iter()
            .zip(&record.fields)
            .all(|(slot, f)| match slot {
                Slot::Value(i, _)
                    if *i >= shape.partition && (*i < shape.keys || *i >= shape.statics_end) =>
                {
                    null(f)
                }
                _ => true,
            });
    let mut cells: Vec<Option<Bytes>> = vec![None; shape.width];
    for ((slot, field), name) in layout
        .slots
        .iter()
        .zip(&record.fields)
        .zip(layout.header.iter())
    {
        let Field { text, quoted } = field;
        let bad = |e: String| format!("line {}: column {name:?}: {e}", record.line);
        // The text of null (`nullValue`), unquoted: never a value, whatever the column.
        let marked_null = !quoted && !null_value.is_empty() && text == null_value;
        match slot {
            Slot::Skip => {}
            Slot::Value(..) if marked_null => {}
            Slot::Value(i, t) => {
                if text.is_empty() {
                    // A clustering value is never null in a row of its own, so an empty one
                    // is the empty value even unquoted: cqlsh writes the empty string as
                    // nothing, as it writes null. (A partition key cannot be empty.)
                    let clustering = *i >= shape.partition && *i < shape.keys && !statics_only;
                    if (*quoted || clustering) && empty_is_a_value(t) {
                        cells[*i] = Some(Bytes::new());
                    }
                    continue;
                }
                cells[*i] = Some(Bytes::from(codec::from_text(t, text, forms).map_err(bad)?));
            }
            Slot::Writetime(i) => {
                if !text.is_empty() && !marked_null {
                    let micros = codec::parse_writetime(text, forms).map_err(bad)?;
                    cells[*i] = Some(Bytes::copy_from_slice(&micros.to_be_bytes()));
                }
            }
            Slot::Ttl(i) => {
                if !text.is_empty() && !marked_null {
                    let ttl = ttl_seconds(text).map_err(bad)?;
                    // 0 is no TTL, as CQL reads it.
                    if ttl > 0 {
                        cells[*i] = Some(Bytes::copy_from_slice(&ttl.to_be_bytes()));
                    }
                }
            }
        }
    }
    Ok(RawRow { cells })
}

impl Scan for CsvScan {
    type Unit = FileUnit;
    type Row = RawRow;
    type Cursor = u64;
    type Error = CsvError;

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
            if finished.contains(&id) {
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
            plan.work.push(FileUnit { file: file.clone() });
        }
        plan
    }

    fn start(&self, _: &FileUnit) -> u64 {
        0
    }

    /// A file's rows are not known before it is read: its bytes are the measure, each page
    /// covering the bytes read for it, so a load of one big file shows its progress as it goes.
    async fn expect(&self, work: &[FileUnit]) -> Vec<Option<Expected>> {
        work.iter()
            .map(|unit| {
                let size = unit.file.entry.size as f64;
                Some(Expected {
                    count: size,
                    bytes: size,
                    exact: true,
                })
            })
            .collect()
    }

    async fn page(&self, unit: &FileUnit, cursor: &u64) -> Result<Page<RawRow, u64>, CsvError> {
        let store = self.store.clone();
        let file = unit.file.clone();
        let source = self.source.clone();
        let shape = self.shape;
        let keys = self.keys.clone();
        self.open
            .page(
                &unit.file.entry.id,
                *cursor,
                move |tx| stream_file(store, file, source, (shape, keys), tx),
                || CsvError::Read {
                    file: unit.file.entry.id.clone(),
                    message: "the reading task ended without a result".into(),
                    retry: Retry::Safe,
                },
            )
            .await
    }

    fn row_size(row: &RawRow) -> usize {
        row.size()
    }
}

type Sender = PageSender<RawRow, CsvError>;

/// A file's rows gathered into pages of `batchSize` rows or [`PAGE_BYTES`], whichever comes
/// first, each sent as it fills.
struct PageOut<'a> {
    tx: &'a Sender,
    rows: Vec<RawRow>,
    bytes: usize,
    batch_size: usize,
    /// The bytes of the file read so far, and those the pages sent cover: each page covers
    /// what was read since the one before, so the pages of a file add up to its size, the
    /// measure its progress is estimated in ([`Scan::expect`]).
    read: Rc<Cell<u64>>,
    covered: u64,
}

impl<'a> PageOut<'a> {
    fn new(tx: &'a Sender, batch_size: usize, read: Rc<Cell<u64>>) -> Self {
        Self {
            tx,
            rows: Vec::with_capacity(batch_size.min(4096)),
            bytes: 0,
            batch_size,
            read,
            covered: 0,
        }
    }

    /// The bytes read since the last page.
    fn measured(&mut self) -> Option<u64> {
        let read = self.read.get();
        let measured = read.saturating_sub(self.covered);
        self.covered = read;
        Some(measured)
    }

    /// Adds a row, sending the page once full; false when the unit was stopped.
    fn push(&mut self, row: RawRow) -> bool {
        self.bytes += row.size();
        self.rows.push(row);
        if self.rows.len() < self.batch_size && self.bytes < PAGE_BYTES {
            return true;
        }
        self.bytes = 0;
        let measured = self.measured();
        self.tx
            .blocking_send(Ok((std::mem::take(&mut self.rows), false, measured)))
            .is_ok()
    }

    /// Sends the last page (maybe empty): the file has ended.
    fn finish(mut self) {
        let measured = self.measured();
        let _ = self.tx.blocking_send(Ok((self.rows, true, measured)));
    }
}

/// A file's bytes as they are read, counted for [`PageOut`].
struct Counted<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Counted<R> {
    fn new(inner: R) -> (Self, Rc<Cell<u64>>) {
        let read = Rc::new(Cell::new(0));
        (
            Self {
                inner,
                read: read.clone(),
            },
            read,
        )
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// Downloads and parses one file, sending its rows page by page; the last page (maybe empty)
/// once the file has ended.
async fn stream_file(
    store: Arc<dyn ObjectStore>,
    file: Arc<LoadFile>,
    source: CsvSource,
    (shape, keys): (RowShape, Arc<HashMap<String, Slot>>),
    tx: Sender,
) {
    let id = file.entry.id.clone();
    let got = match store.get(&file.entry.path).await {
        Ok(got) => got,
        Err(e) => {
            let retry = if matches!(e, object_store::Error::NotFound { .. }) {
                Retry::Never
            } else {
                Retry::Safe
            };
            let _ = tx
                .send(Err(CsvError::Read {
                    file: id,
                    message: e.to_string(),
                    retry,
                }))
                .await;
            return;
        }
    };
    let body = tokio_util::io::StreamReader::new(got.into_stream().map_err(std::io::Error::other));
    let sync = tokio_util::io::SyncIoBridge::new(body);
    let joined = tokio::task::spawn_blocking(move || {
        let (body, read) = Counted::new(sync);
        let out = (&tx, read);
        match source.format {
            Format::Csv => parse_file(body, &file, &source, shape, out),
            Format::Json => parse_json_file(body, &file, &source, (shape, &keys), out),
        }
    })
    .await;
    if let Err(e) = joined {
        tracing::error!(error = %e, "a CSV file reader panicked");
    }
}

fn parse_file(
    mut body: impl Read,
    file: &LoadFile,
    source: &CsvSource,
    shape: RowShape,
    (tx, read): (&Sender, Rc<Cell<u64>>),
) {
    let fail = |message: String, retry: Retry| CsvError::Read {
        file: file.entry.id.clone(),
        message,
        retry,
    };
    let mut parser = Parser::new(source.dialect.clone(), source.limits);
    let mut records: Vec<Record> = Vec::new();
    let mut page = PageOut::new(tx, source.batch_size, read);
    let mut header_seen = false;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match body.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                let _ = tx.blocking_send(Err(fail(format!("cannot read: {e}"), Retry::Safe)));
                return;
            }
        };
        let parsed = if n == 0 {
            parser.finish(&mut records)
        } else {
            parser.push(&buf[..n], &mut records)
        };
        if let Err(e) = parsed {
            let _ = tx.blocking_send(Err(fail(e.to_string(), Retry::Never)));
            return;
        }
        for record in records.drain(..) {
            if !header_seen {
                header_seen = true;
                // The file read now must be the one planned: the same names in the same order.
                let names = record.fields.iter().map(|f| f.text.trim());
                if !names.eq(file.layout.header.iter().map(String::as_str)) {
                    let _ = tx.blocking_send(Err(fail(
                        format!(
                            "line {}: its header changed since the job started; submit the job again",
                            record.line
                        ),
                        Retry::Never,
                    )));
                    return;
                }
                continue;
            }
            match to_row(
                &file.layout,
                &record,
                shape,
                (&source.dialect.null_value, &source.forms),
            ) {
                Ok(row) => {
                    if !page.push(row) {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(fail(e, Retry::Never)));
                    return;
                }
            }
        }
        if n == 0 {
            break;
        }
    }
    page.finish();
}

/// Reads a JSON file — one object per line (DSBulk's `MULTI_DOCUMENT`), or one array of
/// objects (`SINGLE_DOCUMENT`) when its first byte other than whitespace is `[` — sending its
/// rows page by page; the last page (maybe empty) once the file has ended. Either way one
/// object at a time is held, at most [`MAX_JSON_LINE`] bytes.
fn parse_json_file(
    body: impl Read,
    file: &LoadFile,
    source: &CsvSource,
    (shape, keys): (RowShape, &HashMap<String, Slot>),
    (tx, read): (&Sender, Rc<Cell<u64>>),
) {
    use std::io::BufRead;
    let fail = |message: String, retry: Retry| CsvError::Read {
        file: file.entry.id.clone(),
        message,
        retry,
    };
    let mut reader = std::io::BufReader::with_capacity(CHUNK, body);
    // The leading whitespace is passed over (its lines counted) to see the first byte.
    let mut first_line = 1u64;
    let array = loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) => {
                let _ = tx.blocking_send(Err(fail(format!("cannot read: {e}"), Retry::Safe)));
                return;
            }
        };
        if buf.is_empty() {
            break false;
        }
        let blank = buf.iter().take_while(|b| b.is_ascii_whitespace()).count();
        first_line += buf[..blank].iter().filter(|b| **b == b'\n').count() as u64;
        let first = buf.get(blank).copied();
        reader.consume(blank);
        if let Some(first) = first {
            break first == b'[';
        }
    };
    let found = if array {
        DocumentMode::Single
    } else {
        DocumentMode::Multi
    };
    if let Some(mode) = source.document_mode.filter(|m| *m != found) {
        let _ = tx.blocking_send(Err(fail(
            format!(
                "is {} now, not {} (source.documentMode); it changed since the job started",
                found.name(),
                mode.name()
            ),
            Retry::Never,
        )));
        return;
    }
    let mut page = PageOut::new(tx, source.batch_size, read);
    let mut row = |text: &[u8], number: u64| match json_row(text, number, keys, shape, &source.forms) {
        Ok(row) => page.push(row),
        Err(e) => {
            let _ = tx.blocking_send(Err(fail(e, Retry::Never)));
            false
        }
    };
    if array {
        let mut objects = ArrayObjects::new(MAX_JSON_LINE, first_line);
        let mut out = Vec::new();
        loop {
            let buf = match reader.fill_buf() {
                Ok(buf) => buf,
                Err(e) => {
                    let _ = tx.blocking_send(Err(fail(format!("cannot read: {e}"), Retry::Safe)));
                    return;
                }
            };
            let n = buf.len();
            let scanned = if n == 0 {
                objects.finish()
            } else {
                objects.push(buf, &mut out)
            };
            reader.consume(n);
            for (number, text) in out.drain(..) {
                if !row(&text, number) {
                    return;
                }
            }
            if let Err(e) = scanned {
                let _ = tx.blocking_send(Err(fail(e, Retry::Never)));
                return;
            }
            if n == 0 {
                break;
            }
        }
    } else {
        let mut line = Vec::new();
        for number in first_line.. {
            line.clear();
            match (&mut reader)
                .take(MAX_JSON_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
            {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.blocking_send(Err(fail(format!("cannot read: {e}"), Retry::Safe)));
                    return;
                }
            }
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            if text.len() > MAX_JSON_LINE {
                let _ = tx.blocking_send(Err(fail(
                    format!("line {number} is longer than {MAX_JSON_LINE} bytes"),
                    Retry::Never,
                )));
                return;
            }
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if !row(text, number) {
                return;
            }
        }
    }
    page.finish();
}

/// One JSON object as a row: each key's value in its column's cell, `null` (or a key not
/// there) left unset.
fn json_row(
    text: &[u8],
    line: u64,
    keys: &HashMap<String, Slot>,
    shape: RowShape,
    forms: &codec::Forms,
) -> Result<RawRow, String> {
    let object: HashMap<String, &serde_json::value::RawValue> =
        serde_json::from_slice(text).map_err(|e| format!("line {line}: not a JSON object: {e}"))?;
    let mut cells: Vec<Option<Bytes>> = vec![None; shape.width];
    for (name, raw) in object {
        let bad = |e: String| format!("line {line}: column {name:?}: {e}");
        let value = raw.get().trim();
        // DSBulk's other spellings of writetime and TTL keys (`WRITETIME(v)`, quoted names).
        let canonical = meta_base(&name).map(|(base, writetime)| {
            format!("{}({base})", if writetime { "writetime" } else { "ttl" })
        });
        let Some(slot) = keys.get(canonical.as_ref().unwrap_or(&name)) else {
            return Err(format!(
                "line {line}: key {name:?} is not a column of the target table (nor the writetime or TTL of a regular or static one)"
            ));
        };
        if value == "null" {
            continue;
        }
        // A writetime or TTL may be a JSON string (DSBulk writes a writetime as one).
        let unquoted = || -> Result<String, String> {
            if value.starts_with('"') {
                serde_json::from_str::<String>(value).map_err(|e| e.to_string())
            } else {
                Ok(value.to_string())
            }
        };
        match slot {
            Slot::Skip => {}
            Slot::Value(i, t) => {
                cells[*i] = Some(Bytes::from(codec::from_json_text(t, value, forms).map_err(bad)?));
            }
            Slot::Writetime(i) => {
                let micros = codec::parse_writetime(&unquoted().map_err(bad)?, forms).map_err(bad)?;
                cells[*i] = Some(Bytes::copy_from_slice(&micros.to_be_bytes()));
            }
            Slot::Ttl(i) => {
                let text = unquoted().map_err(bad)?;
                let ttl = ttl_seconds(&text).map_err(bad)?;
                if ttl > 0 {
                    cells[*i] = Some(Bytes::copy_from_slice(&ttl.to_be_bytes()));
                }
            }
        }
    }
    Ok(RawRow { cells })
}

/// A TTL field: whole seconds, 0 (none) to `i32::MAX`.
fn ttl_seconds(text: &str) -> Result<i32, String> {
    text.trim()
        .parse()
        .ok()
        .filter(|t: &i32| *t >= 0)
        .ok_or_else(|| {
            format!(
                "expected a TTL in seconds (0 to {}), got {:?}",
                i32::MAX,
                crate::answer::cap(text)
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dsbulk_writetime_and_ttl_fields_name_their_column() {
        assert_eq!(meta_base("writetime(v)"), Some(("v".into(), true)));
        assert_eq!(meta_base("WRITETIME(v)"), Some(("v".into(), true)));
        assert_eq!(meta_base("ttl( v )"), Some(("v".into(), false)));
        assert_eq!(
            meta_base("ttl(\"Odd\"\"Name\")"),
            Some(("Odd\"Name".into(), false))
        );
        assert_eq!(meta_base("writetime"), None);
        assert_eq!(meta_base("ttl(v"), None);
        assert_eq!(meta_base("v"), None);
    }

    #[test]
    fn an_unquoted_null_value_is_null_and_a_quoted_one_text() {
        let layout = Layout {
            header: Arc::new(vec!["k".into(), "v".into(), "n".into(), "ttl(v)".into()]),
            slots: vec![
                Slot::Value(0, ColumnType::Native(NativeType::Int)),
                Slot::Value(1, ColumnType::Native(NativeType::Text)),
                Slot::Value(2, ColumnType::Native(NativeType::Int)),
                Slot::Ttl(4),
            ],
        };
        let shape = RowShape {
            width: 5,
            data: 3,
            partition: 1,
            keys: 1,
            statics_end: 1,
        };
        let dialect = crate::connectors::csv::record::Dialect {
            null_value: "NULL".into(),
            ..Default::default()
        };
        let mut parser = Parser::new(dialect, Default::default());
        let mut records = Vec::new();
        parser
            .push(
                b"1,NULL,NULL,NULL\n2,\"NULL\",,\n3,,7,5\n4,NULLx,NULL,\"\"\n",
                &mut records,
            )
            .unwrap();
        let cells: Vec<Vec<Option<Vec<u8>>>> = records
            .iter()
            .map(|r| {
                to_row(&layout, r, shape, ("NULL", &codec::Forms::default()))
                    .unwrap()
                    .cells
                    .into_iter()
                    .map(|c| c.map(|b| b.to_vec()))
                    .collect()
            })
            .collect();
        let int = |i: i32| Some(i.to_be_bytes().to_vec());
        let text = |t: &str| Some(t.as_bytes().to_vec());
        assert_eq!(
            cells,
            vec![
                vec![int(1), None, None, None, None],
                vec![int(2), text("NULL"), None, None, None],
                vec![int(3), None, int(7), None, int(5)],
                vec![int(4), text("NULLx"), None, None, None],
            ]
        );
        // Without nullValue the text is a value: an int column refuses it, naming it.
        let e = to_row(&layout, &records[0], shape, ("", &codec::Forms::default())).unwrap_err();
        assert!(e.contains("line 1: column \"n\""), "{e}");
    }

    /// A CSV file's pages cover its bytes as they are read, once in all, so that the
    /// progress of a load of one big file moves as it is read: with a file of four chunks and
    /// pages of 1000 rows, pages are sent as the chunks come and together cover every byte.
    #[test]
    fn the_pages_of_a_csv_file_cover_its_bytes_as_they_are_read() {
        let text = "source:\n  type: csv\n  path: /in\n  batchSize: 1000\n";
        let doc: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
        let source = CsvSource::parse(text, doc["source"].clone(), Format::Csv).unwrap();
        let mut body = b"k\n".to_vec();
        let mut n = 0;
        while body.len() < 4 * CHUNK {
            body.extend_from_slice(format!("row-{n:08}\n").as_bytes());
            n += 1;
        }
        let size = body.len() as u64;
        let file = LoadFile {
            entry: FileEntry {
                id: "file:/in/a.csv".into(),
                path: "in/a.csv".into(),
                size,
                version: String::new(),
            },
            layout: Arc::new(Layout {
                header: Arc::new(vec!["k".into()]),
                slots: vec![Slot::Value(0, ColumnType::Native(NativeType::Text))],
            }),
        };
        let shape = RowShape {
            width: 1,
            data: 1,
            partition: 1,
            keys: 1,
            statics_end: 1,
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel(4096);
        let reader = std::thread::spawn(move || {
            let (counted, read) = Counted::new(&body[..]);
            parse_file(counted, &file, &source, shape, (&tx, read));
        });
        let (mut rows, mut covered) = (0, Vec::new());
        while let Some(Ok((page, last, measured))) = rx.blocking_recv() {
            rows += page.len();
            covered.push(measured.expect("every page says what it covers"));
            if last {
                break;
            }
        }
        reader.join().unwrap();
        assert_eq!(rows, n);
        assert_eq!(covered.iter().sum::<u64>(), size);
        // Each chunk read is covered by the first page sent after it: at least one page a
        // chunk, and none covering more than a chunk.
        assert!(covered.iter().filter(|c| **c > 0).count() >= 4, "{covered:?}");
        assert!(covered.iter().all(|c| *c <= CHUNK as u64), "{covered:?}");
    }

    /// Reads `body` as a JSON file of one text column `k`: the rows of every page, or the
    /// error.
    fn read_json(body: Vec<u8>) -> Result<Vec<RawRow>, String> {
        read_json_as(body, "")
    }

    /// [`read_json`] with more keys of the source section.
    fn read_json_as(body: Vec<u8>, keys: &str) -> Result<Vec<RawRow>, String> {
        let text = format!("source:\n  type: json\n  path: /in\n{keys}");
        let text = text.as_str();
        let doc: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
        let source = CsvSource::parse(text, doc["source"].clone(), Format::Json).unwrap();
        let file = LoadFile {
            entry: FileEntry {
                id: "file:/in/a.json".into(),
                path: "in/a.json".into(),
                size: body.len() as u64,
                version: String::new(),
            },
            layout: Arc::new(Layout {
                header: Arc::new(vec!["k".into()]),
                slots: vec![Slot::Value(0, ColumnType::Native(NativeType::Text))],
            }),
        };
        let keys = HashMap::from([(
            "k".to_string(),
            Slot::Value(0, ColumnType::Native(NativeType::Text)),
        )]);
        let shape = RowShape {
            width: 1,
            data: 1,
            partition: 1,
            keys: 1,
            statics_end: 1,
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
        let size = body.len() as u64;
        let reader = std::thread::spawn(move || {
            let (counted, read) = Counted::new(&body[..]);
            parse_json_file(counted, &file, &source, (shape, &keys), (&tx, read));
        });
        let mut rows = Vec::new();
        let mut measured = 0;
        while let Some(page) = rx.blocking_recv() {
            match page {
                Ok((page, last, covered)) => {
                    rows.extend(page);
                    measured += covered.expect("every page says what it covers");
                    if last {
                        break;
                    }
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        reader.join().unwrap();
        // The pages of a file cover its bytes, once: the measure its progress is shown in.
        assert_eq!(measured, size);
        Ok(rows)
    }

    /// An object line of exactly `len` bytes (newline not counted).
    fn object_of(len: usize) -> Vec<u8> {
        let mut line = b"{\"k\":\"".to_vec();
        line.resize(len - 2, b'x');
        line.extend_from_slice(b"\"}\n");
        line
    }

    #[test]
    fn a_json_line_of_the_longest_length_is_read_and_one_byte_longer_refused() {
        let mut body = object_of(MAX_JSON_LINE);
        body.extend_from_slice(b"\n{\"k\":null}\n");
        let rows = read_json(body).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0].cells[0].as_ref().map(|c| c.len()),
            Some(MAX_JSON_LINE - 8)
        );
        assert_eq!(rows[1].cells[0], None, "null is left unset");
        let e = read_json(object_of(MAX_JSON_LINE + 1)).unwrap_err();
        assert!(
            e.contains("a.json") && e.contains("line 1 is longer than 67108864 bytes"),
            "{e}"
        );
        let e = read_json(b"{\"k\":\"a\"}\n[1]\n".to_vec()).unwrap_err();
        assert!(e.contains("line 2: not a JSON object"), "{e}");
    }

    fn texts(rows: &[RawRow]) -> Vec<Option<&str>> {
        rows.iter()
            .map(|r| {
                r.cells[0]
                    .as_deref()
                    .map(|c| std::str::from_utf8(c).unwrap())
            })
            .collect()
    }

    #[test]
    fn a_json_array_is_read_object_by_object_whatever_its_layout() {
        // DSBulk's layout, a hand-written one with objects over several lines, and none.
        let rows = read_json(b"[\n{\"k\":\"a\"},\n{\"k\":null}\n]\n".to_vec()).unwrap();
        assert_eq!(texts(&rows), vec![Some("a"), None]);
        let rows = read_json(
            b"\n  [ {\n  \"k\": \"[b],\"\n}, {\"k\":\"c\"} ,{}]  \n".to_vec(),
        )
        .unwrap();
        assert_eq!(texts(&rows), vec![Some("[b],"), Some("c"), None]);
        assert!(read_json(b" [ ] ".to_vec()).unwrap().is_empty());
        // A bad value names the line its object begins on and the key.
        let e = read_json(b"[{\"k\":\"a\"},\n\n {\"k\":\n [1]}]".to_vec()).unwrap_err();
        assert!(
            e.contains("a.json") && e.contains("line 3: column \"k\""),
            "{e}"
        );
        let e = read_json(b"\n[{\"k\":\"a\"},\n{\"x\":\"b\"}]".to_vec()).unwrap_err();
        assert!(e.contains("line 3: key \"x\" is not a column"), "{e}");
        let e = read_json(b"[{\"k\":\"a\"},\n{\"k\":\"b\"}".to_vec()).unwrap_err();
        assert!(
            e.contains("line 2: the file ends before the array's closing `]`"),
            "{e}"
        );
        // With documentMode set, the other layout is refused.
        let keys = "  documentMode: MULTI_DOCUMENT\n";
        let e = read_json_as(b"[{\"k\":\"a\"}]".to_vec(), keys).unwrap_err();
        assert!(e.contains("source.documentMode"), "{e}");
        let keys = "  documentMode: SINGLE_DOCUMENT\n";
        assert_eq!(
            texts(&read_json_as(b" [{\"k\":\"a\"}]".to_vec(), keys).unwrap()),
            vec![Some("a")]
        );
        // Lines of objects keep their numbers past leading blank lines.
        let e = read_json(b"\n\n{\"k\":\"a\"}\n{\"k\":[1]}\n".to_vec()).unwrap_err();
        assert!(e.contains("line 4: column \"k\""), "{e}");
    }

    /// An array of one object of exactly `len` bytes, and a second object.
    fn array_of(len: usize) -> Vec<u8> {
        let mut body = b"[\n".to_vec();
        let mut object = object_of(len);
        object.pop();
        body.extend_from_slice(&object);
        body.extend_from_slice(b",\n{\"k\":\"z\"}\n]\n");
        body
    }

    #[test]
    fn an_array_object_of_the_longest_length_is_read_and_one_byte_longer_refused() {
        let rows = read_json(array_of(MAX_JSON_LINE)).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0].cells[0].as_ref().map(|c| c.len()),
            Some(MAX_JSON_LINE - 8)
        );
        let e = read_json(array_of(MAX_JSON_LINE + 1)).unwrap_err();
        assert!(
            e.contains("a.json") && e.contains("line 2: an object longer than 67108864 bytes"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn the_first_object_of_an_array_names_the_fields_checked() {
        let entry = FileEntry {
            id: "file:/in/a.json".into(),
            path: "in/a.json".into(),
            size: 0,
            version: String::new(),
        };
        let keys = async |chunks: &[&'static [u8]], mode: Option<DocumentMode>| {
            let mut stream = futures::stream::iter(
                chunks
                    .iter()
                    .map(|c| Ok(Bytes::from_static(c)))
                    .collect::<Vec<object_store::Result<Bytes>>>(),
            );
            first_object_keys(&mut stream, &entry, mode)
                .await
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            keys(&[b" \n", b" [\n{\"b\":1,", b"\"a\":2}, {\"c\":3}]"], None)
                .await
                .unwrap(),
            vec!["b", "a"]
        );
        assert!(keys(&[b"[", b" ]\n"], None).await.unwrap().is_empty());
        assert_eq!(
            keys(&[b"\n{\"c\":1}\n"], Some(DocumentMode::Multi))
                .await
                .unwrap(),
            vec!["c"]
        );
        let e = keys(&[b"\n\n[{\"c\":1"], None).await.unwrap_err();
        assert!(
            e.contains("a.json: line 3: the object that begins on this line is never closed"),
            "{e}"
        );
        let e = keys(&[b"[\n1]"], None).await.unwrap_err();
        assert!(e.contains("line 2: expected a JSON object"), "{e}");
        let e = keys(&[b"  ", b"\n"], None).await.unwrap_err();
        assert!(e.contains("is empty"), "{e}");
        let e = keys(&[b"[{\"c\":1}]"], Some(DocumentMode::Multi))
            .await
            .unwrap_err();
        assert!(
            e.starts_with("source.documentMode: file:/in/a.json is one JSON array"),
            "{e}"
        );
        let e = keys(&[b"{\"c\":1}"], Some(DocumentMode::Single))
            .await
            .unwrap_err();
        assert!(e.contains("set documentMode to MULTI_DOCUMENT"), "{e}");
    }
}
