//! The CSV sections of a job file (`type: csv`), drover's own (ScyllaDB Migrator has no CSV):
//! a source reads `path` (a file, a directory, or an `s3a://`/`s3://` prefix), a target writes
//! a directory of files. The format keys are DSBulk's `connector.csv.*` names (`header`,
//! `delimiter`, `quote`, `escape`, `comment`, `nullValue`, `maxCharsPerColumn`, `maxColumns`)
//! with its
//! defaults, so a DSBulk command line translates key for key. DSBulk's `connector.json.mode` is
//! `documentMode` here: `mode` is already the target's write mode (error, overwrite, append,
//! ignore), as in a Parquet target. `config/job-csv-load.yaml` and `config/job-csv-unload.yaml`
//! show every key.

use serde::Deserialize;

use super::Format;
use super::codec::{Binary, Forms, Temporal, TemporalKeys};
use super::record::{Dialect, Limits};
use crate::aws::{AwsCredentials, Endpoint};
use crate::connectors::parquet::config::{Location, Mode, S3Access, access};
use crate::jobfile::{JobConfigError, section};

/// Rows per page read from a file when the job does not say (`source.batchSize`).
pub const DEFAULT_BATCH_SIZE: usize = 1000;
/// The largest `source.batchSize`: a page is held in memory whole, once per file read at once.
pub const MAX_BATCH_SIZE: u64 = 100_000;
/// Files read at once when the job does not say (`source.maxConcurrentFiles`).
pub const DEFAULT_FILES_AT_ONCE: usize = 4;
/// The most files read at once.
pub const MAX_FILES_AT_ONCE: u64 = 256;
/// `maxCharsPerColumn` when the job does not say: 1 Mi characters, not DSBulk's 4096, which a
/// blob of 3 KB (4 KB as base64) or a long text of drover's own unloads would exceed.
pub const DEFAULT_MAX_CHARS: usize = 1024 * 1024;
/// The largest `maxCharsPerColumn`: a field is held whole while it is read.
pub const MAX_MAX_CHARS: u64 = 64 * 1024 * 1024;
/// DSBulk's `maxColumns`.
pub const DEFAULT_MAX_COLUMNS: usize = 512;
/// The largest `maxColumns`.
pub const MAX_MAX_COLUMNS: u64 = 10_000;
/// The longest `delimiter`, in characters: a reader matches it at every character.
pub const MAX_DELIMITER: usize = 16;

/// How the objects of a JSON file are laid out: DSBulk's `connector.json.mode`, named
/// `documentMode` here because `mode` is the target's write mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentMode {
    /// `MULTI_DOCUMENT` (DSBulk's default): one object per line.
    Multi,
    /// `SINGLE_DOCUMENT`: the file is one JSON array of objects.
    Single,
}

impl DocumentMode {
    /// DSBulk's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            Self::Multi => "MULTI_DOCUMENT",
            Self::Single => "SINGLE_DOCUMENT",
        }
    }

    /// Reads `key` (DSBulk's values, any case, trimmed).
    fn parse(text: &str, key: &str, value: Option<&str>) -> Result<Option<Self>, JobConfigError> {
        let Some(v) = value else { return Ok(None) };
        match v.trim().to_ascii_uppercase().as_str() {
            "MULTI_DOCUMENT" => Ok(Some(Self::Multi)),
            "SINGLE_DOCUMENT" => Ok(Some(Self::Single)),
            _ => Err(JobConfigError::at(
                text,
                key,
                format!(
                    "must be MULTI_DOCUMENT (one object per line) or SINGLE_DOCUMENT (one array of objects), DSBulk's connector.json.mode values, not {:?}",
                    crate::answer::cap(v)
                ),
            )),
        }
    }
}

/// A `source` of `type: csv` or `type: json`.
#[derive(Debug, Clone)]
pub struct CsvSource {
    /// CSV or JSON.
    pub format: Format,
    /// `path`: what to read (a file, or every `*.csv` below a directory or prefix).
    pub location: Location,
    /// S3 access, for an S3 `path`.
    pub s3: S3Access,
    /// How records are written.
    pub dialect: Dialect,
    /// Bounds of a record.
    pub limits: Limits,
    /// Rows per page (memory per file read at once). Default 1000.
    pub batch_size: usize,
    /// Files read at once. Default 4.
    pub max_concurrent_files: usize,
    /// JSON: the layout every file must have; `None` (the default) takes each file as its
    /// first byte other than whitespace says (`[`: one array of objects).
    pub document_mode: Option<DocumentMode>,
    /// The date, time and timestamp forms fields are read in (DSBulk's `codec.timestamp`,
    /// `codec.date`, `codec.time`, `codec.timeZone`, `codec.unit`, `codec.epoch`); blobs
    /// are read in both forms whatever `binary` says.
    pub forms: Forms,
}

/// A `target` of `type: csv` or `type: json`.
#[derive(Debug, Clone)]
pub struct CsvTarget {
    /// CSV or JSON.
    pub format: Format,
    /// `path`: the directory (or S3 prefix) files are written to.
    pub location: Location,
    /// What to do when `path` holds files already (`error`, the default; `overwrite`,
    /// `append`, `ignore`).
    pub mode: Mode,
    /// S3 access, for an S3 `path`.
    pub s3: S3Access,
    /// How records are written.
    pub dialect: Dialect,
    /// Whether each file starts with a header (default true, as DSBulk).
    pub header: bool,
    /// JSON: one object per line (the default) or one array of objects.
    pub document_mode: DocumentMode,
    /// How blobs are written (DSBulk's `codec.binary`): base64 (the default) or `0x` hex.
    pub binary: Binary,
    /// Whose forms values are written in: DSBulk's (the default) or those `cqlsh COPY FROM`
    /// reads back.
    pub style: Style,
    /// The date, time and timestamp forms values are written in (as a source's).
    pub temporal: Temporal,
}

/// Whose forms an unload writes values in (`target.style`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// DSBulk's (ISO timestamps, JSON collections, base64 blobs).
    #[default]
    Dsbulk,
    /// Those `cqlsh COPY FROM` reads back exactly (see `codec::to_cqlsh_text`).
    Cqlsh,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSource {
    #[serde(rename = "type")]
    _type: String,
    path: String,
    #[serde(default)]
    credentials: Option<AwsCredentials>,
    #[serde(default)]
    endpoint: Option<Endpoint>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    header: Option<bool>,
    #[serde(default)]
    delimiter: Option<String>,
    #[serde(default)]
    quote: Option<String>,
    #[serde(default)]
    escape: Option<String>,
    #[serde(default)]
    comment: Option<String>,
    #[serde(default)]
    null_value: Option<String>,
    #[serde(default)]
    max_chars_per_column: Option<u64>,
    #[serde(default)]
    max_columns: Option<u64>,
    #[serde(default)]
    batch_size: Option<u64>,
    #[serde(default)]
    max_concurrent_files: Option<u64>,
    #[serde(default)]
    document_mode: Option<String>,
    #[serde(default)]
    binary: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    date: Option<String>,
    #[serde(default)]
    time: Option<String>,
    #[serde(default)]
    time_zone: Option<String>,
    #[serde(default)]
    unit: Option<String>,
    #[serde(default)]
    epoch: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTarget {
    #[serde(rename = "type")]
    _type: String,
    path: String,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    credentials: Option<AwsCredentials>,
    #[serde(default)]
    endpoint: Option<Endpoint>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    header: Option<bool>,
    #[serde(default)]
    delimiter: Option<String>,
    #[serde(default)]
    quote: Option<String>,
    #[serde(default)]
    escape: Option<String>,
    #[serde(default)]
    null_value: Option<String>,
    #[serde(default)]
    document_mode: Option<String>,
    #[serde(default)]
    binary: Option<String>,
    #[serde(default)]
    style: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    date: Option<String>,
    #[serde(default)]
    time: Option<String>,
    #[serde(default)]
    time_zone: Option<String>,
    #[serde(default)]
    unit: Option<String>,
    #[serde(default)]
    epoch: Option<String>,
}

/// One character (`quote`, `escape`, `comment`).
fn one_char(text: &str, key: &str, value: Option<&str>) -> Result<Option<char>, JobConfigError> {
    let Some(v) = value else { return Ok(None) };
    let mut chars = v.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c != '\n' && c != '\r' => Ok(Some(c)),
        _ => Err(JobConfigError::at(
            text,
            key,
            format!(
                "must be one character (not a line end), not {:?}",
                crate::answer::cap(v)
            ),
        )),
    }
}

/// The keys of a CSV record's format in a section, as given.
struct DialectKeys {
    delimiter: Option<String>,
    quote: Option<String>,
    escape: Option<String>,
    comment: Option<String>,
    null_value: Option<String>,
}

/// The dialect the keys of `side` describe; the quote, escape, comment and delimiter must
/// differ, or a record could be read two ways, and the text of null must need no quotes.
fn dialect(text: &str, side: &str, keys: DialectKeys) -> Result<Dialect, JobConfigError> {
    let DialectKeys {
        delimiter,
        quote,
        escape,
        comment,
        null_value,
    } = keys;
    let key = |k: &str| format!("{side}.{k}");
    let default = Dialect::default();
    let delimiter = match delimiter {
        None => default.delimiter,
        Some(d)
            if d.is_empty() || d.contains(['\n', '\r']) || d.chars().count() > MAX_DELIMITER =>
        {
            return Err(JobConfigError::at(
                text,
                &key("delimiter"),
                format!("must be 1 to {MAX_DELIMITER} characters, not a line end"),
            ));
        }
        Some(d) => d,
    };
    let quote = one_char(text, &key("quote"), quote.as_deref())?.unwrap_or(default.quote);
    let escape = one_char(text, &key("escape"), escape.as_deref())?.unwrap_or(default.escape);
    let comment = one_char(text, &key("comment"), comment.as_deref())?;
    // The quote may be its own escape (`""` inside quotes, as RFC 4180 has it).
    let clash = |what: &str, other: &str| {
        Err(JobConfigError::at(
            text,
            &key(what),
            format!(
                "must not begin with (or be) the {other} character; a record would read two ways"
            ),
        ))
    };
    if delimiter.starts_with(quote) {
        return clash("delimiter", "quote");
    }
    if delimiter.starts_with(escape) {
        return clash("delimiter", "escape");
    }
    if let Some(c) = comment {
        if c == quote {
            return clash("comment", "quote");
        }
        if c == escape {
            return clash("comment", "escape");
        }
        if delimiter.starts_with(c) {
            return clash("comment", "delimiter's first");
        }
    }
    let null_value = null_value.unwrap_or_default();
    // A null is written unquoted (quotes make it a text), so it must read back as one whole
    // unquoted field wherever it stands.
    let why = if null_value.contains(['\n', '\r']) {
        Some("a line end, which would end the record".to_string())
    } else if null_value.contains(delimiter.as_str())
        || (!null_value.is_empty() && super::record::ends_in_delimiter(&null_value, &delimiter))
    {
        Some(format!(
            "the delimiter {delimiter:?}, which would split the field"
        ))
    } else if null_value.contains(quote) {
        Some(format!(
            "the quote character {quote:?}; a null is written unquoted"
        ))
    } else if null_value.contains(escape) {
        Some(format!(
            "the escape character {escape:?}; a null is written unquoted, where the escape is read as text or a quote"
        ))
    } else {
        comment
            .filter(|c| null_value.starts_with(*c))
            .map(|c| format!("the comment character {c:?} first; a record starting with a null would be skipped as a comment"))
    };
    if let Some(why) = why {
        return Err(JobConfigError::at(
            text,
            &key("nullValue"),
            format!(
                "{:?} holds {why}: a null must be written as one unquoted field",
                crate::answer::cap(&null_value)
            ),
        ));
    }
    Ok(Dialect {
        delimiter,
        quote,
        escape,
        comment,
        null_value,
        quote_escapes: false,
    })
}

/// Reads the date, time and timestamp forms of a section.
fn temporal(text: &str, side: &str, keys: TemporalKeys<'_>) -> Result<Temporal, JobConfigError> {
    Temporal::new(keys).map_err(|(key, why)| JobConfigError::at(text, &format!("{side}.{key}"), why))
}

/// Reads `target.binary` (DSBulk's `codec.binary`, flattened as the other keys are: `BASE64`
/// or `HEX`, any case).
fn binary(text: &str, value: Option<&str>) -> Result<Binary, JobConfigError> {
    let Some(v) = value else {
        return Ok(Binary::Base64);
    };
    match v.trim().to_ascii_uppercase().as_str() {
        "BASE64" => Ok(Binary::Base64),
        "HEX" => Ok(Binary::Hex),
        _ => Err(JobConfigError::at(
            text,
            "target.binary",
            format!(
                "must be BASE64 (AQI=) or HEX (0x0102), DSBulk's codec.binary values, not {:?}",
                crate::answer::cap(v)
            ),
        )),
    }
}

/// Refuses `nullValue: NULL` written unquoted, which YAML reads as null (as it does `null` and
/// `~`): the key would be taken as left out, and nulls written as nothing, not as the text
/// meant.
fn null_value_is_text(
    text: &str,
    side: &str,
    value: &yaml_serde::Value,
) -> Result<(), JobConfigError> {
    match value.get("nullValue") {
        Some(v) if v.is_null() => Err(JobConfigError::at(
            text,
            &format!("{side}.nullValue"),
            "is YAML's null (NULL, null, ~ or nothing, unquoted), not a text; quote it (nullValue: 'NULL'), or leave the key out for nulls as empty fields",
        )),
        _ => Ok(()),
    }
}

/// Refuses the keys of CSV's record format in a JSON section, naming the first.
fn csv_only(text: &str, side: &str, given: &[(&str, bool)]) -> Result<(), JobConfigError> {
    match given.iter().find(|(_, set)| *set) {
        Some((key, _)) => Err(JobConfigError::at(
            text,
            &format!("{side}.{key}"),
            "is a key of CSV files; JSON files (objects, whose keys name their fields) have none",
        )),
        None => Ok(()),
    }
}

/// Refuses the keys of JSON files in a CSV section, naming the first.
fn json_only(text: &str, side: &str, given: &[(&str, bool)]) -> Result<(), JobConfigError> {
    match given.iter().find(|(_, set)| *set) {
        Some((key, _)) => Err(JobConfigError::at(
            text,
            &format!("{side}.{key}"),
            "is a key of JSON files (type: json); CSV files have no such setting",
        )),
        None => Ok(()),
    }
}

impl CsvSource {
    /// Reads and checks a `source` section of `format`.
    pub fn parse(
        text: &str,
        value: yaml_serde::Value,
        format: Format,
    ) -> Result<Self, JobConfigError> {
        null_value_is_text(text, "source", &value)?;
        let s: RawSource = section(text, "source", value)?;
        if format == Format::Json {
            csv_only(
                text,
                "source",
                &[
                    ("header", s.header.is_some()),
                    ("delimiter", s.delimiter.is_some()),
                    ("quote", s.quote.is_some()),
                    ("escape", s.escape.is_some()),
                    ("comment", s.comment.is_some()),
                    ("nullValue", s.null_value.is_some()),
                    ("maxCharsPerColumn", s.max_chars_per_column.is_some()),
                    ("maxColumns", s.max_columns.is_some()),
                ],
            )?;
        } else {
            json_only(
                text,
                "source",
                &[("documentMode", s.document_mode.is_some())],
            )?;
        }
        let document_mode =
            DocumentMode::parse(text, "source.documentMode", s.document_mode.as_deref())?;
        if s.binary.is_some() {
            return Err(JobConfigError::at(
                text,
                "source.binary",
                "is a key of an unload (the form blobs are written in); a load reads both forms, 0x hex and base64, whatever the files hold",
            ));
        }
        let location =
            Location::parse(&s.path).map_err(|e| JobConfigError::at(text, "source.path", e))?;
        if s.header == Some(false) {
            return Err(JobConfigError::at(
                text,
                "source.header",
                "false is not supported yet: the header names the columns each field goes to; add a header line to the files",
            ));
        }
        JobConfigError::check_range(text, "source.batchSize", s.batch_size, 1, MAX_BATCH_SIZE)?;
        JobConfigError::check_range(
            text,
            "source.maxConcurrentFiles",
            s.max_concurrent_files,
            1,
            MAX_FILES_AT_ONCE,
        )?;
        JobConfigError::check_range(
            text,
            "source.maxCharsPerColumn",
            s.max_chars_per_column,
            1,
            MAX_MAX_CHARS,
        )?;
        JobConfigError::check_range(text, "source.maxColumns", s.max_columns, 1, MAX_MAX_COLUMNS)?;
        let dialect = dialect(
            text,
            "source",
            DialectKeys {
                delimiter: s.delimiter,
                quote: s.quote,
                escape: s.escape,
                comment: s.comment,
                null_value: s.null_value,
            },
        )?;
        let s3 = access(
            text,
            "source",
            &location,
            S3Access {
                credentials: s.credentials,
                region: s.region,
                endpoint: s.endpoint,
            },
        )?;
        Ok(Self {
            format,
            location,
            s3,
            dialect,
            limits: Limits {
                max_chars_per_field: s
                    .max_chars_per_column
                    .map_or(DEFAULT_MAX_CHARS, |n| n as usize),
                max_fields: s.max_columns.map_or(DEFAULT_MAX_COLUMNS, |n| n as usize),
            },
            batch_size: s.batch_size.map_or(DEFAULT_BATCH_SIZE, |n| n as usize),
            max_concurrent_files: s
                .max_concurrent_files
                .map_or(DEFAULT_FILES_AT_ONCE, |n| n as usize),
            document_mode,
            forms: Forms {
                binary: Binary::default(),
                temporal: temporal(
                text,
                "source",
                TemporalKeys {
                    timestamp: s.timestamp.as_deref(),
                    date: s.date.as_deref(),
                    time: s.time.as_deref(),
                    time_zone: s.time_zone.as_deref(),
                    unit: s.unit.as_deref(),
                    epoch: s.epoch.as_deref(),
                },
            )?,
            },
        })
    }
}

impl CsvTarget {
    /// Reads and checks a `target` section of `format`.
    pub fn parse(
        text: &str,
        value: yaml_serde::Value,
        format: Format,
    ) -> Result<Self, JobConfigError> {
        null_value_is_text(text, "target", &value)?;
        let t: RawTarget = section(text, "target", value)?;
        if format == Format::Json {
            csv_only(
                text,
                "target",
                &[
                    ("header", t.header.is_some()),
                    ("delimiter", t.delimiter.is_some()),
                    ("quote", t.quote.is_some()),
                    ("escape", t.escape.is_some()),
                    ("nullValue", t.null_value.is_some()),
                    ("style", t.style.is_some()),
                ],
            )?;
        } else {
            json_only(
                text,
                "target",
                &[("documentMode", t.document_mode.is_some())],
            )?;
        }
        let document_mode =
            DocumentMode::parse(text, "target.documentMode", t.document_mode.as_deref())?
                .unwrap_or(DocumentMode::Multi);
        let location =
            Location::parse(&t.path).map_err(|e| JobConfigError::at(text, "target.path", e))?;
        let mode = Mode::parse(text, t.mode.as_deref(), "CSV or JSON")?;
        let dialect = dialect(
            text,
            "target",
            DialectKeys {
                delimiter: t.delimiter,
                quote: t.quote,
                escape: t.escape,
                comment: None,
                null_value: t.null_value,
            },
        )?;
        let style = match t.style.as_deref().map(|s| s.trim().to_ascii_lowercase()) {
            None => Style::Dsbulk,
            Some(s) if s == "dsbulk" => Style::Dsbulk,
            Some(s) if s == "cqlsh" => Style::Cqlsh,
            Some(_) => {
                return Err(JobConfigError::at(
                    text,
                    "target.style",
                    format!(
                        "must be dsbulk (DSBulk's forms, the default) or cqlsh (forms cqlsh COPY FROM reads back), not {:?}",
                        crate::answer::cap(t.style.as_deref().unwrap_or_default())
                    ),
                ));
            }
        };
        if style == Style::Cqlsh && t.binary.is_some() {
            return Err(JobConfigError::at(
                text,
                "target.binary",
                "cannot be set with style: cqlsh, which writes blobs as 0x hex (the only form cqlsh COPY FROM reads)",
            ));
        }
        let keys = TemporalKeys {
            timestamp: t.timestamp.as_deref(),
            date: t.date.as_deref(),
            time: t.time.as_deref(),
            time_zone: t.time_zone.as_deref(),
            unit: t.unit.as_deref(),
            epoch: t.epoch.as_deref(),
        };
        if style == Style::Cqlsh
            && let Some((key, _)) = [
                ("timestamp", keys.timestamp),
                ("date", keys.date),
                ("time", keys.time),
                ("timeZone", keys.time_zone),
                ("unit", keys.unit),
                ("epoch", keys.epoch),
            ]
            .into_iter()
            .find(|(_, v)| v.is_some())
        {
            return Err(JobConfigError::at(
                text,
                &format!("target.{key}"),
                "cannot be set with style: cqlsh, which writes dates, times and timestamps in the forms cqlsh COPY FROM reads (timestamps as epoch milliseconds)",
            ));
        }
        let temporal = temporal(text, "target", keys)?;
        let mut dialect = dialect;
        // cqlsh's reader (Python's csv) takes the escape as one outside quotes too: a field
        // holding it is quoted, where it is written doubled.
        dialect.quote_escapes = style == Style::Cqlsh;
        let s3 = access(
            text,
            "target",
            &location,
            S3Access {
                credentials: t.credentials,
                region: t.region,
                endpoint: t.endpoint,
            },
        )?;
        Ok(Self {
            format,
            location,
            mode,
            s3,
            dialect,
            header: t.header.unwrap_or(true),
            document_mode,
            binary: binary(text, t.binary.as_deref())?,
            style,
            temporal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(body: &str) -> Result<CsvSource, JobConfigError> {
        let text = format!("source:\n  type: csv\n  path: /data/in\n{body}");
        let doc: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
        CsvSource::parse(&text, doc["source"].clone(), Format::Csv)
    }

    fn target(body: &str) -> Result<CsvTarget, JobConfigError> {
        let text = format!("target:\n  type: csv\n  path: /data/out\n{body}");
        let doc: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
        CsvTarget::parse(&text, doc["target"].clone(), Format::Csv)
    }

    #[test]
    fn defaults_are_dsbulks() {
        let s = source("").unwrap();
        assert_eq!(s.dialect.delimiter, ",");
        assert_eq!(s.dialect.quote, '"');
        assert_eq!(s.dialect.escape, '\\');
        assert_eq!(s.dialect.comment, None);
        assert_eq!(s.limits.max_chars_per_field, 1024 * 1024);
        assert_eq!(s.limits.max_fields, 512);
        let t = target("").unwrap();
        assert!(t.header);
        assert_eq!(t.mode, Mode::Error);
    }

    #[test]
    fn date_time_and_timestamp_forms_are_read_on_both_sides_and_refused_with_cqlsh() {
        let keys = "  timestamp: 'yyyy-MM-dd HH:mm:ss.SSSXXX'\n  date: BASIC_ISO_DATE\n  time: UNITS_SINCE_EPOCH\n  timeZone: Europe/Paris\n  unit: SECONDS\n  epoch: 2000-01-01T00:00:00Z\n";
        let s = source(keys).unwrap();
        assert!(!s.forms.temporal.holds_microseconds());
        let t = target(keys).unwrap();
        assert!(!t.temporal.holds_microseconds());
        let e = target("  style: cqlsh\n  timeZone: UTC\n").unwrap_err();
        assert!(e.message.contains("target.timeZone: cannot be set with style: cqlsh"), "{e}");
        let e = source("  batchSize: 10\n  timestamp: yyyy-MM-ddTHH\n").unwrap_err();
        assert!(e.message.contains("source.timestamp: the pattern"), "{e}");
        assert!(e.message.contains("the letter T"), "{e}");
        assert_eq!(e.line, Some(5));
    }

    #[test]
    fn bounds_are_taken_at_the_bound_and_refused_past_it() {
        let at = source("  maxCharsPerColumn: 67108864\n  maxColumns: 10000\n").unwrap();
        assert_eq!(at.limits.max_chars_per_field, 64 * 1024 * 1024);
        assert_eq!(at.limits.max_fields, 10_000);
        let e = source("  maxCharsPerColumn: 67108865\n").unwrap_err();
        assert!(
            e.message
                .contains("source.maxCharsPerColumn: must be 1 to 67108864"),
            "{e}"
        );
        assert_eq!(e.line, Some(4));
        let e = source("  maxColumns: 10001\n").unwrap_err();
        assert!(e.message.contains("source.maxColumns"), "{e}");
        assert!(source("  batchSize: 0\n").is_err());
    }

    #[test]
    fn characters_that_would_read_two_ways_are_refused_with_their_key() {
        let e = source("  quote: \"''\"\n").unwrap_err();
        assert!(
            e.message.starts_with("source.quote: must be one character"),
            "{e}"
        );
        let e = source("  delimiter: '\"'\n").unwrap_err();
        assert!(e.message.starts_with("source.delimiter:"), "{e}");
        let e = source("  comment: ','\n").unwrap_err();
        assert!(e.message.starts_with("source.comment:"), "{e}");
        let e = target("  delimiter: ''\n").unwrap_err();
        assert!(e.message.starts_with("target.delimiter:"), "{e}");
        assert_eq!(
            source("  delimiter: '||'\n").unwrap().dialect.delimiter,
            "||"
        );
        let sixteen = "|".repeat(16);
        let d = source(&format!("  delimiter: '{sixteen}'\n")).unwrap();
        assert_eq!(d.dialect.delimiter, sixteen);
        let e = source(&format!("  delimiter: '{sixteen}|'\n")).unwrap_err();
        assert!(e.message.contains("1 to 16 characters"), "{e}");
        let e = source("  escape: ';'\n  delimiter: ';'\n").unwrap_err();
        assert!(e.message.contains("the escape character"), "{e}");
        assert_eq!(source("  escape: '\"'\n").unwrap().dialect.escape, '"');
        let e = source("  header: false\n").unwrap_err();
        assert!(
            e.message
                .starts_with("source.header: false is not supported"),
            "{e}"
        );
        let e = target("  mode: sideways\n").unwrap_err();
        assert!(
            e.message
                .contains("valid values: append, error, ignore, overwrite"),
            "{e}"
        );
        let e = source("  delimeter: ';'\n").unwrap_err();
        assert!(e.message.contains("delimeter"), "{e}");
    }

    #[test]
    fn json_sections_refuse_the_keys_of_csv_records() {
        let text = "source:\n  type: json\n  path: /in\n  batchSize: 10\n";
        let doc: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
        let s = CsvSource::parse(text, doc["source"].clone(), Format::Json).unwrap();
        assert_eq!((s.format, s.batch_size), (Format::Json, 10));
        let text = "source:\n  type: json\n  path: /in\n  delimiter: ';'\n";
        let doc: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
        let e = CsvSource::parse(text, doc["source"].clone(), Format::Json).unwrap_err();
        assert!(
            e.message
                .starts_with("source.delimiter: is a key of CSV files"),
            "{e}"
        );
        assert_eq!(e.line, Some(4));
        let text = "target:\n  type: json\n  path: /out\n  header: false\n";
        let doc: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
        let e = CsvTarget::parse(text, doc["target"].clone(), Format::Json).unwrap_err();
        assert!(e.message.starts_with("target.header:"), "{e}");
    }

    #[test]
    fn document_mode_is_dsbulks_json_mode_in_any_case_and_refused_for_csv() {
        let json = |side: &str, body: &str| {
            let text = format!("{side}:\n  type: json\n  path: /p\n{body}");
            let doc: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
            if side == "source" {
                CsvSource::parse(&text, doc["source"].clone(), Format::Json)
                    .map(|s| s.document_mode.map(DocumentMode::name))
            } else {
                CsvTarget::parse(&text, doc["target"].clone(), Format::Json)
                    .map(|t| Some(t.document_mode.name()))
            }
        };
        assert_eq!(json("source", "").unwrap(), None, "a load looks at each file");
        assert_eq!(json("target", "").unwrap(), Some("MULTI_DOCUMENT"));
        assert_eq!(
            json("target", "  documentMode: single_document\n").unwrap(),
            Some("SINGLE_DOCUMENT")
        );
        assert_eq!(
            json("source", "  documentMode: ' MULTI_DOCUMENT'\n").unwrap(),
            Some("MULTI_DOCUMENT")
        );
        let e = json("target", "  documentMode: SINGLE\n").unwrap_err();
        assert!(
            e.message
                .starts_with("target.documentMode: must be MULTI_DOCUMENT")
                && e.message.contains("\"SINGLE\""),
            "{e}"
        );
        assert_eq!(e.line, Some(4));
        let e = source("  documentMode: SINGLE_DOCUMENT\n").unwrap_err();
        assert!(
            e.message
                .starts_with("source.documentMode: is a key of JSON files"),
            "{e}"
        );
        let e = target("  documentMode: SINGLE_DOCUMENT\n").unwrap_err();
        assert!(e.message.starts_with("target.documentMode:"), "{e}");
        assert_eq!(e.line, Some(4));
    }

    #[test]
    fn null_value_is_taken_unless_it_would_need_quotes() {
        assert_eq!(source("").unwrap().dialect.null_value, "");
        assert_eq!(
            target("  nullValue: 'NULL'\n").unwrap().dialect.null_value,
            "NULL"
        );
        for null in ["NULL", "null", "~", ""] {
            let e = target(&format!("  nullValue: {null}\n")).unwrap_err();
            assert!(
                e.message.starts_with("target.nullValue: is YAML's null"),
                "{e}"
            );
            assert_eq!(e.line, Some(4));
        }
        assert_eq!(
            source("  nullValue: ' \\N'\n  escape: '\"'\n")
                .unwrap()
                .dialect
                .null_value,
            " \\N"
        );
        for (body, why) in [
            ("  nullValue: 'a,b'\n", "the delimiter \",\""),
            ("  nullValue: \"a\\nb\"\n", "a line end"),
            ("  nullValue: \"a\\rb\"\n", "a line end"),
            ("  nullValue: 'x\"'\n", "the quote character"),
            ("  nullValue: '\\N'\n", "the escape character"),
            (
                "  delimiter: '|;|'\n  nullValue: 'N|;'\n",
                "the delimiter \"|;|\"",
            ),
        ] {
            for e in [source(body).unwrap_err(), target(body).unwrap_err()] {
                assert!(
                    e.message.starts_with("source.nullValue: ")
                        || e.message.starts_with("target.nullValue: "),
                    "{e}"
                );
                assert!(e.message.contains(why), "{body}: {e}");
                assert!(e.message.contains("one unquoted field"), "{e}");
                assert!(e.line.is_some(), "{e}");
            }
        }
        // Near misses of a long delimiter are taken.
        let d = source("  delimiter: '|;|'\n  nullValue: 'N|'\n").unwrap();
        assert_eq!(d.dialect.null_value, "N|");
        let e = source("  comment: '#'\n  nullValue: '#N'\n").unwrap_err();
        assert!(e.message.contains("the comment character"), "{e}");
        let text = "target:\n  type: json\n  path: /out\n  nullValue: 'NULL'\n";
        let doc: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
        let e = CsvTarget::parse(text, doc["target"].clone(), Format::Json).unwrap_err();
        assert!(
            e.message
                .starts_with("target.nullValue: is a key of CSV files"),
            "{e}"
        );
        assert_eq!(e.line, Some(4));
        let text = "source:\n  type: json\n  path: /in\n  nullValue: 'NULL'\n";
        let doc: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
        let e = CsvSource::parse(text, doc["source"].clone(), Format::Json).unwrap_err();
        assert!(e.message.starts_with("source.nullValue:"), "{e}");
    }

    /// `style`: dsbulk (the default) or cqlsh, any case; anything else, `binary` beside cqlsh
    /// and `style` in a JSON section are refused naming the key.
    #[test]
    fn style_is_dsbulk_or_cqlsh_and_cqlsh_fixes_the_blob_form() {
        assert_eq!(target("").unwrap().style, Style::Dsbulk);
        let t = target("  style: CQLSH\n").unwrap();
        assert_eq!(t.style, Style::Cqlsh);
        assert!(t.dialect.quote_escapes);
        assert!(!target("").unwrap().dialect.quote_escapes);
        let e = target("  style: excel\n").unwrap_err();
        assert!(e.message.starts_with("target.style: must be dsbulk"), "{e}");
        let e = target("  style: cqlsh\n  binary: HEX\n").unwrap_err();
        assert!(e.message.starts_with("target.binary: cannot be set"), "{e}");
        let text = "target:\n  type: json\n  path: /out\n  style: cqlsh\n";
        let doc: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
        let e = CsvTarget::parse(text, doc["target"].clone(), Format::Json).unwrap_err();
        assert!(e.message.starts_with("target.style: is a key of CSV files"), "{e}");
    }

    #[test]
    fn binary_is_dsbulks_codec_binary_in_any_case_for_csv_and_json_unloads() {
        assert_eq!(target("").unwrap().binary, Binary::Base64);
        assert_eq!(target("  binary: hex\n").unwrap().binary, Binary::Hex);
        assert_eq!(target("  binary: ' BASE64'\n").unwrap().binary, Binary::Base64);
        let text = "target:\n  type: json\n  path: /out\n  binary: HEX\n";
        let doc: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
        let t = CsvTarget::parse(text, doc["target"].clone(), Format::Json).unwrap();
        assert_eq!(t.binary, Binary::Hex);
        let e = target("  binary: base16\n").unwrap_err();
        assert!(
            e.message.starts_with("target.binary: must be BASE64")
                && e.message.contains("\"base16\""),
            "{e}"
        );
        assert_eq!(e.line, Some(4));
        let e = source("  binary: HEX\n").unwrap_err();
        assert!(
            e.message
                .starts_with("source.binary: is a key of an unload"),
            "{e}"
        );
        assert_eq!(e.line, Some(4));
    }

    #[test]
    fn the_shipped_examples_parse_with_every_key_shown() {
        for (text, source) in [
            (include_str!("../../../config/job-csv-load.yaml"), true),
            (include_str!("../../../config/job-csv-unload.yaml"), false),
        ] {
            let doc: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
            if source {
                let s = CsvSource::parse(text, doc["source"].clone(), Format::Csv).unwrap();
                assert_eq!(s.limits.max_fields, 512);
            } else {
                let t = CsvTarget::parse(text, doc["target"].clone(), Format::Csv).unwrap();
                assert!(t.header);
                assert_eq!(t.dialect.escape, '\\');
                assert_eq!(t.binary, Binary::Base64);
            }
            // The keys shown commented out (a JSON one beside a CSV example, or a sample value)
            // parse as written, in a section of their format.
            let side = if source { "source" } else { "target" };
            let mut shown = 0;
            for line in text.lines() {
                let Some(key) = line.strip_prefix("  # ") else {
                    continue;
                };
                let format = if key.starts_with("nullValue:") {
                    Format::Csv
                } else if key.starts_with("documentMode:") {
                    Format::Json
                } else {
                    continue;
                };
                shown += 1;
                let section = format!(
                    "{side}:\n  type: {}\n  path: /p\n  {key}\n",
                    format.name()
                );
                let doc: yaml_serde::Value = yaml_serde::from_str(&section).unwrap();
                let parsed = if source {
                    CsvSource::parse(&section, doc[side].clone(), format).map(|_| ())
                } else {
                    CsvTarget::parse(&section, doc[side].clone(), format).map(|_| ())
                };
                assert!(parsed.is_ok(), "{key}: {parsed:?}");
            }
            assert_eq!(shown, 2, "nullValue and documentMode in the {side} example");
        }
    }
}
