//! CQL → CSV: each token-range unit of the source table becomes one CSV file, written under a
//! temporary name while the unit is read and made visible only once the unit is complete
//! (the same writer of a file per unit as the Parquet export), so no reader and no resumed
//! unload ever sees a truncated file.
//!
//! A file is named after the table and its unit's token ranges (`part-<tag>-<start>_<end>.csv`,
//! where `<tag>` is a digest of the table's name): a unit unloaded again replaces its file, and
//! a resume deletes the files of units no savepoint recorded, knowing each file's ranges from
//! its name. Columns come in DSBulk's order (partition key, clustering key, the rest), each
//! value in DSBulk's form; with `preserveTimestamps` each static and regular column is
//! followed by its `writetime(col)` (a UTC timestamp with microseconds) and `ttl(col)` (the
//! seconds it had left when read).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use object_store::path::Path as ObjPath;
use scylla::cluster::metadata::ColumnType;

use super::config::{CsvTarget, DocumentMode, Style};
use super::record::{Dialect, write_record};
use super::{CsvError, Format, codec};
use crate::connectors::cql::rows::RawRow;
use crate::connectors::cql::scan::RangeScan;
use crate::connectors::cql::schema;
use crate::connectors::cql::{self, CqlSource};
use crate::connectors::parquet::config::Mode;
use crate::connectors::parquet::store::Store;
use crate::connectors::seam::SeamError;
use crate::connectors::seam::{Pacing, Pushed, Refused, Sink};
use crate::connectors::unit_files::{
    FileError, FileFormat, UnitBatch, UnitFiles, UnitInfo, UnitRequest,
};
use crate::jobfile::Rename;
use crate::savepoints::{self, ranges::TokenRange};

/// Rows per write request (lines appended to the unit's file).
const ROWS_PER_REQUEST: usize = 1000;
/// The most token ranges a file's name holds: five keep a name under 255 bytes. A unit of
/// more pieces (only a resume over a savepoint of another split or ring makes one) fails,
/// saying so, rather than writing a file whose rows a later resume could not place.
const MAX_PIECES_IN_NAME: usize = 5;

/// What the checks decided: copy with these parts, or nothing to do.
pub type Opened = crate::connectors::unit_files::Opened<(RangeScan, CsvSink, Pacing)>;

/// Where a field of a file's records comes from in a scanned row.
#[derive(Debug, Clone)]
enum Field {
    /// A column's value.
    Value(usize, ColumnType<'static>),
    /// A column's writetime (a bigint of microseconds).
    Writetime(usize),
    /// A column's TTL (an int of seconds).
    Ttl(usize),
}

/// Connects to the source, checks its table and the target location (and `mode`), and
/// prepares the scan. Nothing is written or deleted yet: that waits for [`Sink::start`].
pub async fn open_unload(
    src: &CqlSource,
    dst: &CsvTarget,
    renames: &[Rename],
    done: &savepoints::Progress,
) -> Result<Opened, SeamError> {
    let invalid = |key: &str, message: String| CsvError::Invalid {
        key: key.into(),
        message,
    };
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
            return Err(invalid(
                "renames",
                format!(
                    "column {:?} does not exist in the source table {}",
                    r.from,
                    table.qualified()
                ),
            )
            .into());
        }
    }
    let name = |c: &schema::Column| {
        renames
            .iter()
            .find(|r| r.from == c.name)
            .map_or(c.name.clone(), |r| r.to.clone())
    };
    let preserve = src.preserve_timestamps && !table.is_counter_table();
    if preserve && dst.style == Style::Cqlsh {
        return Err(invalid(
            "source.preserveTimestamps",
            "cannot be used with target.style: cqlsh: cqlsh COPY FROM has no writetime or TTL columns to read them back from; unload in DSBulk's style (the default) to keep them".into(),
        )
        .into());
    }
    if preserve && !dst.temporal.holds_microseconds() {
        return Err(invalid(
            "target.timestamp",
            "cannot write a writetime, which has microseconds, exactly: with source.preserveTimestamps the timestamp form must hold them (CQL_TIMESTAMP, an ISO formatter, UNITS_SINCE_EPOCH with MICROSECONDS or NANOSECONDS, or a pattern with six or more fraction digits, SSSSSS)".into(),
        )
        .into());
    }
    if preserve
        && let Some(c) = table
            .statics
            .iter()
            .chain(&table.regular)
            .find(|c| c.is_multi_cell())
    {
        return Err(invalid(
            "source.preserveTimestamps",
            format!(
                "column {:?} of {} is a non-frozen collection or UDT, whose elements each have their own writetime and TTL, which one field of a CSV or JSON file cannot hold (DSBulk's form has one per column); unload without preserveTimestamps, or export to Parquet, which keeps them",
                c.name,
                table.qualified()
            ),
        )
        .into());
    }
    // The scan's rows are every column, then a writetime and a TTL per static and regular
    // column (see `prepare_select`); the file has each column followed by its pair.
    let mut header = Vec::new();
    let mut fields = Vec::new();
    let keys = table.partition_key.len() + table.clustering_key.len();
    let timed = table.statics.len() + table.regular.len();
    for (i, c) in table.all().enumerate() {
        header.push(name(c));
        fields.push(Field::Value(i, c.typ.clone()));
        if preserve && i >= keys {
            let pair = table.all().count() + 2 * (i - keys);
            header.push(format!("writetime({})", cql_name(&name(c))));
            fields.push(Field::Writetime(pair));
            header.push(format!("ttl({})", cql_name(&name(c))));
            fields.push(Field::Ttl(pair + 1));
        }
    }
    debug_assert!(!preserve || fields.len() == table.all().count() + 2 * timed);
    let store = Store::open("target", &dst.location, &dst.s3).map_err(CsvError::from)?;
    let tag = format!(
        "{:08x}",
        xxhash_rust::xxh3::xxh3_64(format!("{}.{}", table.keyspace, table.table).as_bytes()) as u32
    );
    let names = Names {
        tag,
        extension: dst.format.extension(),
    };
    let deletes = match plan_target(&store, dst.mode, &names, done).await? {
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
    let sink = CsvSink {
        files: Arc::new(
            UnitFiles::new(
                store,
                "drover-csv-spool",
                CsvFiles {
                    header: dst.header,
                    columns: header,
                    fields,
                    dialect: dst.dialect.clone(),
                    names,
                    format: dst.format,
                    array: dst.format == Format::Json && dst.document_mode == DocumentMode::Single,
                    forms: codec::Forms {
                        binary: dst.binary,
                        temporal: dst.temporal.clone(),
                    },
                    cqlsh: dst.style == Style::Cqlsh,
                },
            )
            .map_err(CsvError::from)?,
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

/// `text` as a JSON string.
fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// A column's name as CQL writes it inside `writetime(…)`: as it is when CQL would read it
/// back the same unquoted (lower case letters, digits, `_`), else quoted.
fn cql_name(name: &str) -> String {
    let plain = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_string()
    } else {
        schema::quote(name)
    }
}

/// How the files of an unload are named: after the table (`tag`) and the unit's ranges.
#[derive(Debug, Clone)]
pub struct Names {
    tag: String,
    /// `.csv` or `.json`.
    extension: &'static str,
}

impl Names {
    /// `part-<tag>-<start>_<end>[+<start>_<end>…].csv` (or `.json`) for a unit's key
    /// (`start:end,…`).
    fn final_name(&self, key: &str) -> Result<String, String> {
        let pieces: Vec<&str> = key.split(',').collect();
        if pieces.len() > MAX_PIECES_IN_NAME {
            return Err(format!(
                "unit {key} is {} token ranges, more than a file name holds ({MAX_PIECES_IN_NAME}): resume with the splitCount of the run that wrote the savepoint, or unload to an empty path",
                pieces.len()
            ));
        }
        Ok(format!(
            "part-{}-{}{}",
            self.tag,
            pieces.join("+").replace(':', "_"),
            self.extension
        ))
    }

    /// The token ranges of one of this table's files, from its name.
    fn ranges(&self, file_name: &str) -> Option<Vec<TokenRange>> {
        let rest = file_name
            .strip_prefix(&format!("part-{}-", self.tag))?
            .strip_suffix(self.extension)?;
        rest.split('+')
            .map(|p| {
                let (a, b) = p.split_once('_')?;
                TokenRange::new(a.parse().ok()?, b.parse().ok()?)
            })
            .collect()
    }

    fn ours(&self, p: &ObjPath) -> bool {
        p.filename().is_some_and(|n| self.ranges(n).is_some())
    }

    fn our_temp(&self, p: &ObjPath) -> bool {
        p.filename()
            .is_some_and(|n| n.starts_with(&format!(".part-{}-", self.tag)) && n.ends_with(".tmp"))
    }
}

/// A file a reader would take: `*.csv` (or `*.json`), not hidden.
fn is_data_file(p: &ObjPath, extension: &str) -> bool {
    let name = p.filename().unwrap_or("");
    name.ends_with(extension) && !name.starts_with('_') && !name.starts_with('.')
}

/// What is at the target and what must go before the unload starts; `None` for `ignore`
/// with files present.
async fn plan_target(
    store: &Store,
    mode: Mode,
    names: &Names,
    done: &savepoints::Progress,
) -> Result<Option<Vec<ObjPath>>, CsvError> {
    if let Some(root) = &store.local_root
        && root.is_file()
    {
        return Err(CsvError::Invalid {
            key: "target.path".into(),
            message: format!(
                "{} is a file; a CSV or JSON target is a directory",
                root.display()
            ),
        });
    }
    let existing = store.list_all().await?;
    let recorded = done.ranges(&savepoints::TOKEN_RANGES);
    if !recorded.ranges().is_empty() {
        // A resume: keep the files of recorded units, delete the rest of ours (written by a
        // run that stopped before recording them; their rows are unloaded again).
        let deletes: Vec<ObjPath> = existing
            .iter()
            .map(|m| m.location.clone())
            .filter(|p| {
                names.our_temp(p)
                    || p.filename()
                        .and_then(|n| names.ranges(n))
                        .is_some_and(|pieces| !pieces.iter().all(|r| recorded.covers(*r)))
            })
            .collect();
        if !deletes.is_empty() {
            tracing::info!(
                "{} file(s) of units no savepoint recorded will be deleted and unloaded again",
                deletes.len()
            );
        }
        return Ok(Some(deletes));
    }
    let data: Vec<&ObjPath> = existing
        .iter()
        .map(|m| &m.location)
        .filter(|p| is_data_file(p, names.extension))
        .collect();
    let temps = || {
        existing
            .iter()
            .map(|m| m.location.clone())
            .filter(|p| names.our_temp(p))
            .collect()
    };
    match (mode, data.first().map(|p| store.id_of(p))) {
        (_, None) => Ok(Some(temps())),
        (Mode::Error, Some(first)) => Err(CsvError::Invalid {
            key: "target.path".into(),
            message: format!(
                "{} already holds {} {} file(s) (first: {first}); mode error (the default) refuses to write there: set target.mode to overwrite, append or ignore",
                store.location,
                data.len(),
                names.extension.trim_start_matches('.').to_uppercase()
            ),
        }),
        (Mode::Ignore, Some(first)) => {
            tracing::info!(
                "{} already holds data files (first: {first}); mode ignore: nothing is written",
                store.location
            );
            Ok(None)
        }
        (Mode::Overwrite, Some(_)) => {
            tracing::info!(
                "mode overwrite: the {} object(s) under {} will be deleted when the unload starts",
                existing.len(),
                store.location
            );
            Ok(Some(existing.into_iter().map(|m| m.location).collect()))
        }
        (Mode::Append, Some(_)) => {
            if let Some(p) = data.iter().find(|p| names.ours(p)) {
                return Err(CsvError::Invalid {
                    key: "target.mode".into(),
                    message: format!(
                        "append: {} already holds an unload of this table ({}), whose files this one would replace; use overwrite, or another path",
                        store.location,
                        store.id_of(p)
                    ),
                });
            }
            Ok(Some(temps()))
        }
    }
}

/// Writes rows of a CQL scan to CSV files, one per unit.
pub struct CsvSink {
    files: Arc<UnitFiles<CsvFiles>>,
    deletes: Mutex<Vec<ObjPath>>,
}

/// How the files of an unload are named and encoded (shared with the blocking tasks that
/// write them).
pub struct CsvFiles {
    /// Whether a CSV file starts with a header.
    header: bool,
    /// The name of each field (the header's; a JSON object's keys).
    columns: Vec<String>,
    fields: Vec<Field>,
    dialect: Dialect,
    names: Names,
    format: Format,
    /// JSON as one array of objects (`documentMode: SINGLE_DOCUMENT`).
    array: bool,
    /// How blobs, dates, times and timestamps are written (`binary`, `timestamp`, …).
    forms: codec::Forms,
    /// Values in the forms cqlsh COPY FROM reads (`style: cqlsh`).
    cqlsh: bool,
}

/// An open file, and whether a record went to it yet (an array's items are separated).
pub struct FileWriter {
    out: std::io::BufWriter<std::fs::File>,
    empty: bool,
}

impl CsvFiles {
    /// The record of one row: a CSV line, or a JSON object (every field named, null as
    /// `null`, as DSBulk writes them) without its line end, which [`FileFormat::encode`] adds.
    fn encode_row(&self, row: &RawRow, out: &mut Vec<u8>) -> Result<(), String> {
        let json = self.format == Format::Json;
        let mut texts: Vec<Option<String>> = Vec::with_capacity(self.fields.len());
        for (n, field) in self.fields.iter().enumerate() {
            let text = match field {
                Field::Value(i, t) => row.cells[*i]
                    .as_deref()
                    .map(|v| {
                        if json {
                            codec::to_json_text(t, v, &self.forms)
                        } else if self.cqlsh {
                            codec::to_cqlsh_text(t, v)
                        } else {
                            codec::to_text(t, v, &self.forms)
                        }
                    })
                    .transpose(),
                Field::Writetime(i) => cql::codec::read_i64(&row.cells[*i])
                    .map(|w| {
                        let text = codec::writetime_text(w, &self.forms)?;
                        Ok(if json { json_string(&text) } else { text })
                    })
                    .transpose(),
                Field::Ttl(i) => Ok(cql::codec::read_i32(&row.cells[*i]).map(|t| t.to_string())),
            };
            texts.push(text.map_err(|e| format!("column {:?}: {e}", self.columns[n]))?);
        }
        if json {
            out.push(b'{');
            for (n, (name, text)) in self.columns.iter().zip(&texts).enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(json_string(name).as_bytes());
                out.push(b':');
                out.extend_from_slice(text.as_deref().unwrap_or("null").as_bytes());
            }
            out.push(b'}');
            return Ok(());
        }
        let refs: Vec<Option<&str>> = texts.iter().map(|t| t.as_deref()).collect();
        write_record(out, &refs, &self.dialect);
        Ok(())
    }
}

impl FileFormat for CsvFiles {
    type Piece = RawRow;
    type Encoded = Vec<u8>;
    type Writer = FileWriter;
    type Closed = ();

    fn open(&self, file: std::fs::File, _unit: &UnitInfo) -> Result<Self::Writer, String> {
        let mut w = std::io::BufWriter::with_capacity(256 * 1024, file);
        if self.header && self.format == Format::Csv {
            let mut line = Vec::new();
            let refs: Vec<Option<&str>> = self.columns.iter().map(|h| Some(h.as_str())).collect();
            write_record(&mut line, &refs, &self.dialect);
            w.write_all(&line).map_err(|e| e.to_string())?;
        }
        if self.array {
            w.write_all(b"[").map_err(|e| e.to_string())?;
        }
        Ok(FileWriter {
            out: w,
            empty: true,
        })
    }

    /// CSV lines; JSON objects each on a line of its own, or, in an array, separated by `,`
    /// and a line end (the separator before the first of these rows is [`FileFormat::write`]'s,
    /// which knows whether the file has an object already).
    fn encode(&self, rows: Vec<RawRow>) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(rows.iter().map(RawRow::size).sum::<usize>() * 2);
        for (n, row) in rows.iter().enumerate() {
            if self.array && n > 0 {
                out.extend_from_slice(b",\n");
            }
            self.encode_row(row, &mut out)?;
            if self.format == Format::Json && !self.array {
                out.push(b'\n');
            }
        }
        Ok(out)
    }

    fn write(&self, writer: &mut Self::Writer, encoded: Vec<u8>) -> Result<(), String> {
        if encoded.is_empty() {
            return Ok(());
        }
        // DSBulk's layout of an array: `[`, a line end, the objects separated by `,` and a
        // line end, a line end, `]`.
        if self.array {
            let before: &[u8] = if writer.empty { b"\n" } else { b",\n" };
            writer.out.write_all(before).map_err(|e| e.to_string())?;
        }
        writer.empty = false;
        writer.out.write_all(&encoded).map_err(|e| e.to_string())
    }

    fn close(&self, mut writer: Self::Writer) -> Result<(std::fs::File, ()), String> {
        if self.array {
            writer.out.write_all(b"\n]\n").map_err(|e| e.to_string())?;
        }
        Ok((writer.out.into_inner().map_err(|e| e.to_string())?, ()))
    }
}

impl From<FileError> for CsvError {
    fn from(e: FileError) -> Self {
        CsvError::Write {
            file: e.file,
            message: e.message,
        }
    }
}

impl Sink<RawRow> for CsvSink {
    type Request = UnitRequest<CsvFiles>;
    type Error = CsvError;
    type Batcher = UnitBatch<CsvFiles>;

    async fn start(&self) -> Result<(), CsvError> {
        let deletes = std::mem::take(&mut *self.deletes.lock().unwrap_or_else(|p| p.into_inner()));
        self.files
            .delete_all(deletes)
            .await
            .map_err(|message| CsvError::Store {
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

    async fn send(&self, request: &Self::Request) -> Result<(), CsvError> {
        let name = self.name(&request.unit().key)?;
        Ok(self.files.append(&name, request).await?)
    }

    async fn finish(&self, batcher: Self::Batcher) -> Result<(), CsvError> {
        // No row in this unit: no file.
        let name = self.name(&batcher.unit().key)?;
        self.files.place(batcher, &name).await?;
        Ok(())
    }
}

impl CsvSink {
    fn name(&self, key: &str) -> Result<String, CsvError> {
        self.files
            .format
            .names
            .final_name(key)
            .map_err(|message| CsvError::Write {
                file: self.files.store.location.to_string(),
                message,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scylla::cluster::metadata::NativeType;

    /// The files of one text column `k` (`format`, `array`) and the bytes a unit of `batches`
    /// (each a request's rows) writes.
    fn written(format: Format, array: bool, batches: &[&[Option<&str>]]) -> String {
        let files = CsvFiles {
            header: true,
            columns: vec!["k".into()],
            fields: vec![Field::Value(0, ColumnType::Native(NativeType::Text))],
            dialect: Dialect::default(),
            names: Names {
                tag: "0a1b2c3d".into(),
                extension: format.extension(),
            },
            format,
            array,
            forms: codec::Forms::default(),
            cqlsh: false,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let unit = UnitInfo {
            key: "1:2".into(),
            began_millis: 0,
        };
        let mut w = files
            .open(std::fs::File::create(&path).unwrap(), &unit)
            .unwrap();
        for batch in batches {
            let rows = batch
                .iter()
                .map(|v| RawRow {
                    cells: vec![v.map(|t| bytes::Bytes::copy_from_slice(t.as_bytes()))],
                })
                .collect();
            let encoded = files.encode(rows).unwrap();
            files.write(&mut w, encoded).unwrap();
        }
        drop(files.close(w).unwrap());
        std::fs::read_to_string(&path).unwrap()
    }

    #[test]
    fn a_json_array_is_laid_out_as_dsbulk_writes_it_across_requests() {
        assert_eq!(
            written(
                Format::Json,
                true,
                &[&[Some("a"), None], &[Some("b\n\"c\"")]]
            ),
            "[\n{\"k\":\"a\"},\n{\"k\":null},\n{\"k\":\"b\\n\\\"c\\\"\"}\n]\n"
        );
        assert_eq!(
            written(Format::Json, true, &[&[Some("a")]]),
            "[\n{\"k\":\"a\"}\n]\n"
        );
        assert_eq!(
            written(Format::Json, false, &[&[Some("a"), None], &[Some("b")]]),
            "{\"k\":\"a\"}\n{\"k\":null}\n{\"k\":\"b\"}\n"
        );
        assert_eq!(
            written(Format::Csv, false, &[&[Some("a"), None], &[Some("")]]),
            "k\na\n\n\"\"\n"
        );
    }

    #[test]
    fn a_files_name_gives_back_its_units_ranges() {
        let names = Names {
            tag: "0a1b2c3d".into(),
            extension: ".csv",
        };
        let key = format!("{}:-5,10:{}", i64::MIN, i64::MAX);
        let name = names.final_name(&key).unwrap();
        assert_eq!(
            name,
            "part-0a1b2c3d--9223372036854775808_-5+10_9223372036854775807.csv"
        );
        assert!(name.len() < 255);
        assert_eq!(
            names.ranges(&name).unwrap(),
            vec![
                TokenRange::new(i64::MIN, -5).unwrap(),
                TokenRange::new(10, i64::MAX).unwrap()
            ]
        );
        assert!(names.ours(&ObjPath::from(format!("d/{name}"))));
        assert!(!names.ours(&ObjPath::from("d/part-ffffffff-1_2.csv")));
        assert!(!names.ours(&ObjPath::from("d/output-000001.csv")));
        // Five pieces of the widest tokens still fit a file system's 255 bytes; six refused.
        let widest = format!("{}:{}", i64::MIN + 1, i64::MIN + 2);
        let five = [widest.as_str(); 5].join(",");
        assert!(names.final_name(&five).unwrap().len() <= 255);
        let six = [widest.as_str(); 6].join(",");
        assert!(
            names
                .final_name(&six)
                .unwrap_err()
                .contains("6 token ranges")
        );
    }
}
