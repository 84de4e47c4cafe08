//! CSV records (DSBulk's quoting): a writer and a push parser for the CSV DataStax Bulk Loader
//! writes and reads (univocity-parsers as DSBulk configures it; see
//! `docs/design/csv-json-formats.md`, "DSBulk CSV"), which also reads `cqlsh COPY TO`'s files.
//!
//! Hand-written rather than built on the `csv` crate: that crate cannot tell a quoted empty
//! field (`""`, the empty string) from an unquoted empty field (null), and this format needs
//! the difference (DSBulk unloads null as nothing and the empty string as `""`). Its
//! delimiter is also one byte, where DSBulk allows several characters.
//!
//! Writing: a field is quoted only when it must be (it holds the delimiter, CR, LF or the
//! quote, or is the text of null, `nullValue`); inside quotes the quote is written
//! escape+quote and the escape doubled.
//!
//! Reading ([`Parser`]): bytes arrive in chunks of any size and records come out, each with the
//! line it starts on. Records end at LF, CRLF or a lone CR; newlines inside quotes belong to
//! the field. Inside quotes `\"` and `""` are a quote and `\\` is one backslash; any other
//! escaped character is kept with its escape. Unquoted fields are literal, whitespace
//! included, except that an escaped quote (`\"`, which cqlsh's COPY TO writes without quoting
//! the field) is a quote.
//! After a closing quote only whitespace, then the delimiter or a line end, may follow. Empty
//! lines and comment lines are skipped, a UTF-8 BOM at the start is skipped. Memory is
//! bounded by the limits: a field longer than `max_chars_per_field` or a record of more than
//! `max_fields` fields is refused as soon as it is seen.

use std::mem;

/// How records are written and read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dialect {
    /// Between fields: one or more characters (DSBulk allows several); default `,`. Must not
    /// be empty (an empty delimiter never matches on read, so each line is one field).
    pub delimiter: String,
    /// Around fields that need it; default `"`.
    pub quote: char,
    /// Before a quote or an escape inside quotes; default `\`. May equal `quote` (then a
    /// quote inside quotes is doubled, as in RFC 4180).
    pub escape: char,
    /// A line starting with this character is skipped on read; default none (DSBulk's
    /// `\u0000`).
    pub comment: Option<char>,
    /// The text of a null field (DSBulk's `nullValue`); empty by default, a null then being
    /// written as nothing. The parser does not look at it: an unquoted field equal to it is
    /// null to the caller ([`Field::is_null`]).
    pub null_value: String,
    /// Quote a field that holds the escape character, for readers that take it as an escape
    /// outside quotes too (cqlsh's, Python's csv); DSBulk's reads it there as it is.
    pub quote_escapes: bool,
}

impl Default for Dialect {
    fn default() -> Self {
        Dialect {
            delimiter: ",".to_owned(),
            quote: '"',
            escape: '\\',
            comment: None,
            null_value: String::new(),
            quote_escapes: false,
        }
    }
}

/// Appends one record to `out`, ending with "\n". `None` is null: written as the dialect's
/// `null_value` (nothing by default). `Some("")` is the empty string: written `""`; a text
/// equal to `null_value` is quoted, so that it reads back as the text and not as null.
///
/// A field is quoted when it holds the delimiter, CR, LF or the quote character, or starts
/// with the quote (DSBulk's rule; leading/trailing spaces do not cause quoting). Inside quotes
/// the quote is written escape+quote (`\"`) and the escape char is doubled (`\\`); outside
/// quotes a backslash stays as it is. When `comment` is set, a first field starting with it is
/// quoted too, so that the line is not read back as a comment; and with a multi-character
/// delimiter, a field (not the last) whose end and the delimiter after it hold the delimiter
/// (`a|;` before `|;|`), so that it is not read back cut short. DSBulk does neither.
///
/// A record of no fields, or of one null field without a `null_value`, is an empty line,
/// which readers (DSBulk's and [`Parser`]) skip.
pub fn write_record(out: &mut Vec<u8>, fields: &[Option<&str>], dialect: &Dialect) {
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(dialect.delimiter.as_bytes());
        }
        match field {
            Some(text) => write_field(out, text, i == 0, i + 1 == fields.len(), dialect),
            // Checked when the job is read: it needs no quotes anywhere.
            None => out.extend_from_slice(dialect.null_value.as_bytes()),
        }
    }
    out.push(b'\n');
}

/// One non-null field, quoted when needed.
fn write_field(out: &mut Vec<u8>, text: &str, first: bool, last: bool, dialect: &Dialect) {
    let quote = dialect.quote;
    let needs_quotes = text.is_empty()
        || text == dialect.null_value
        || text.contains(['\r', '\n', quote])
        || (dialect.quote_escapes && text.contains(dialect.escape))
        || (!dialect.delimiter.is_empty() && text.contains(dialect.delimiter.as_str()))
        || (!last && ends_in_delimiter(text, &dialect.delimiter))
        || (first && dialect.comment.is_some_and(|c| text.starts_with(c)));
    if !needs_quotes {
        out.extend_from_slice(text.as_bytes());
        return;
    }
    let (mut qbuf, mut ebuf) = ([0u8; 4], [0u8; 4]);
    let quote_bytes = quote.encode_utf8(&mut qbuf).as_bytes();
    let escape_bytes = dialect.escape.encode_utf8(&mut ebuf).as_bytes();
    out.extend_from_slice(quote_bytes);
    let mut rest = text;
    // Copy runs without a quote or an escape whole; escape those two.
    while let Some(at) = rest.find([quote, dialect.escape]) {
        out.extend_from_slice(&rest.as_bytes()[..at]);
        let c = rest[at..].chars().next().unwrap_or(quote);
        out.extend_from_slice(escape_bytes);
        out.extend_from_slice(if c == quote {
            quote_bytes
        } else {
            escape_bytes
        });
        rest = &rest[at + c.len_utf8()..];
    }
    out.extend_from_slice(rest.as_bytes());
    out.extend_from_slice(quote_bytes);
}

/// Whether an unquoted `text` followed by the delimiter would be read as ending earlier: its
/// end and the delimiter's start together hold the delimiter (`a|;` before `|;|`). Only
/// multi-character delimiters can; DSBulk does not quote these, so its files are ambiguous.
pub fn ends_in_delimiter(text: &str, delimiter: &str) -> bool {
    delimiter.char_indices().skip(1).any(|(k, _)| {
        text.ends_with(&delimiter[..k]) && delimiter[k..] == delimiter[..delimiter.len() - k]
    })
}

/// A field as read: its text and whether it was quoted (an unquoted empty field is null).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub text: String,
    pub quoted: bool,
}

impl Field {
    /// The field as a value: `None` for an unquoted empty field (null), else its text.
    pub fn value(&self) -> Option<&str> {
        if self.is_null("") {
            None
        } else {
            Some(&self.text)
        }
    }

    /// Whether the field is null: unquoted, and empty or `null_value` (a writer quotes a text
    /// equal to it).
    pub fn is_null(&self, null_value: &str) -> bool {
        !self.quoted && (self.text.is_empty() || self.text == null_value)
    }
}

/// A record and the line (1-based, of the input) it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub line: u64,
    pub fields: Vec<Field>,
}

/// Limits (DSBulk's maxCharsPerColumn 4096 default and maxColumns 512; the caller may raise
/// them). Characters are counted as Java counts them (UTF-16 units: a character outside the
/// Basic Multilingual Plane counts two), after unescaping; a field of exactly
/// `max_chars_per_field` and a record of exactly `max_fields` are accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_chars_per_field: usize,
    pub max_fields: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_chars_per_field: 4096,
            max_fields: 512,
        }
    }
}

/// Why input was refused; each names the line (1-based) concerned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A field (counted from the line it starts on) passed `max_chars_per_field`.
    #[error("line {line}: a field longer than {max} characters (maxCharsPerColumn)")]
    FieldTooLong { line: u64, max: usize },
    /// A record (counted from the line it starts on) passed `max_fields`.
    #[error("line {line}: more than {max} fields (maxColumns)")]
    TooManyFields { line: u64, max: usize },
    /// The line holding the first byte that is not UTF-8 (or the last line, for a character
    /// cut off by the end of input).
    #[error("line {line}: not UTF-8")]
    NotUtf8 { line: u64 },
    /// The end of input came inside a quoted field that began on this line.
    #[error("line {line}: a quoted field is never closed")]
    UnclosedQuote { line: u64 },
    /// Something other than whitespace, the delimiter or a line end after a closing quote.
    #[error("line {line}: text after a closing quote")]
    TextAfterQuote { line: u64 },
}

impl RecordError {
    /// The line the error names.
    pub fn line(&self) -> u64 {
        match self {
            RecordError::FieldTooLong { line, .. }
            | RecordError::TooManyFields { line, .. }
            | RecordError::NotUtf8 { line }
            | RecordError::UnclosedQuote { line }
            | RecordError::TextAfterQuote { line } => *line,
        }
    }
}

/// Where the parser is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a line, no record begun: empty lines and comments are skipped here.
    RecordStart,
    /// In a comment line, up to its end.
    Comment,
    /// At the start of a field after a delimiter.
    FieldStart,
    /// In an unquoted field.
    Unquoted,
    /// In a quoted field.
    Quoted,
    /// Inside quotes, just after the escape.
    EscapeInQuoted,
    /// Inside quotes, just after a quote: a doubled quote or the closing one.
    QuoteInQuoted,
    /// After the closing quote: whitespace, then the delimiter or a line end.
    AfterQuote,
}

/// A push parser: bytes arrive in chunks of any size (from a file or an object store stream),
/// records come out. After an error the parser is not to be used again.
#[derive(Debug)]
pub struct Parser {
    dialect: Dialect,
    /// The delimiter's characters.
    delim: Vec<char>,
    limits: Limits,
    state: State,
    /// How many of the delimiter's characters were matched so far (held back, not yet field
    /// text).
    delim_matched: usize,
    /// The line of the next character.
    line: u64,
    /// The last character was a CR (a following LF ends the same line).
    prev_cr: bool,
    /// No character seen yet (a BOM is skipped).
    at_start: bool,
    /// The start of a UTF-8 character cut off by the end of the last chunk.
    utf8_tail: Vec<u8>,
    record_line: u64,
    fields: Vec<Field>,
    field_line: u64,
    field_text: String,
    /// The field's length in UTF-16 units.
    field_units: usize,
    field_quoted: bool,
    /// Complete records not yet handed out.
    ready: Vec<Record>,
    bytes: u64,
}

impl Parser {
    pub fn new(dialect: Dialect, limits: Limits) -> Self {
        let delim = dialect.delimiter.chars().collect();
        Parser {
            dialect,
            delim,
            limits,
            state: State::RecordStart,
            delim_matched: 0,
            line: 1,
            prev_cr: false,
            at_start: true,
            utf8_tail: Vec::new(),
            record_line: 1,
            fields: Vec::new(),
            field_line: 1,
            field_text: String::new(),
            field_units: 0,
            field_quoted: false,
            ready: Vec::new(),
            bytes: 0,
        }
    }

    /// Parses `chunk`, appending complete records to `out` (on an error, the records completed
    /// before it).
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<Record>) -> Result<(), RecordError> {
        self.bytes += chunk.len() as u64;
        let result = self.decode(chunk);
        out.append(&mut self.ready);
        result
    }

    /// The end of input: the last record (without a final newline) is appended; an
    /// unterminated quoted field is an error naming the line it began on. The parser is then
    /// ready for a new input.
    pub fn finish(&mut self, out: &mut Vec<Record>) -> Result<(), RecordError> {
        let result = self.end_of_input();
        out.append(&mut self.ready);
        let bytes = self.bytes;
        *self = Parser::new(self.dialect.clone(), self.limits);
        self.bytes = bytes;
        result
    }

    /// Bytes consumed so far (for progress).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Decodes `chunk` (with the tail of the last one) and feeds its characters.
    fn decode(&mut self, mut chunk: &[u8]) -> Result<(), RecordError> {
        if !self.utf8_tail.is_empty() {
            let want = utf8_len(self.utf8_tail[0]);
            while self.utf8_tail.len() < want && !chunk.is_empty() {
                self.utf8_tail.push(chunk[0]);
                chunk = &chunk[1..];
            }
            if self.utf8_tail.len() < want {
                // Still cut off; a byte that cannot continue it is found when it completes.
                return Ok(());
            }
            let tail = mem::take(&mut self.utf8_tail);
            match std::str::from_utf8(&tail) {
                Ok(s) => self.feed_str(s)?,
                Err(_) => return Err(RecordError::NotUtf8 { line: self.line }),
            }
        }
        match std::str::from_utf8(chunk) {
            Ok(s) => self.feed_str(s),
            Err(e) => {
                let (valid, rest) = chunk.split_at(e.valid_up_to());
                // `valid_up_to` bytes are UTF-8 by definition.
                self.feed_str(std::str::from_utf8(valid).unwrap_or_default())?;
                if e.error_len().is_some() {
                    return Err(RecordError::NotUtf8 { line: self.line });
                }
                self.utf8_tail = rest.to_vec();
                Ok(())
            }
        }
    }

    fn feed_str(&mut self, s: &str) -> Result<(), RecordError> {
        let mut rest = s;
        while let Some(c) = rest.chars().next() {
            // Inside a field, the characters up to the next one that can end it or be escaped
            // go in at once: most of a file is such runs, and the state machine below takes
            // them one by one to the same result.
            let run = self.plain_run(rest);
            if run > 0 {
                rest = &rest[run..];
                continue;
            }
            rest = &rest[c.len_utf8()..];
            if mem::take(&mut self.at_start) && c == '\u{feff}' {
                continue;
            }
            self.process(c)?;
            // Count lines: LF, CRLF and a lone CR each end one.
            if c == '\r' || (c == '\n' && !self.prev_cr) {
                self.line += 1;
            }
            self.prev_cr = c == '\r';
        }
        Ok(())
    }

    /// Takes the characters at the start of `s` that only add to the field being read (no
    /// line end, quote, escape or start of the delimiter), when they fit within the field's
    /// bound; the bytes taken (0 when none, or when the state machine must look at them).
    fn plain_run(&mut self, s: &str) -> usize {
        let in_field = match self.state {
            State::Quoted => true,
            State::Unquoted => self.delim_matched == 0,
            _ => false,
        };
        if !in_field || self.at_start {
            return 0;
        }
        let (quote, escape) = (self.dialect.quote, self.dialect.escape);
        let delim = if self.state == State::Unquoted {
            self.delim.first().copied()
        } else {
            None
        };
        let end = s
            .find(|c: char| c == '\r' || c == '\n' || c == quote || c == escape || Some(c) == delim)
            .unwrap_or(s.len());
        if end == 0 {
            return 0;
        }
        let run = &s[..end];
        let units: usize = run.chars().map(char::len_utf16).sum();
        if self.field_units + units > self.limits.max_chars_per_field {
            // The character past the bound is found, and refused, one at a time.
            return 0;
        }
        self.field_text.push_str(run);
        self.field_units += units;
        self.prev_cr = false;
        end
    }

    fn end_of_input(&mut self) -> Result<(), RecordError> {
        if !self.utf8_tail.is_empty() {
            return Err(RecordError::NotUtf8 { line: self.line });
        }
        while self.delim_matched > 0 {
            self.flush_delimiter()?;
        }
        match self.state {
            State::RecordStart | State::Comment => Ok(()),
            State::Quoted | State::EscapeInQuoted => Err(RecordError::UnclosedQuote {
                line: self.field_line,
            }),
            State::FieldStart | State::Unquoted | State::QuoteInQuoted | State::AfterQuote => {
                self.end_field()?;
                self.end_record();
                Ok(())
            }
        }
    }

    /// One character, matching the delimiter where one may come.
    fn process(&mut self, c: char) -> Result<(), RecordError> {
        if self.state == State::RecordStart {
            if c == '\r' || c == '\n' {
                return Ok(());
            }
            if self.dialect.comment == Some(c) {
                self.state = State::Comment;
                return Ok(());
            }
            self.record_line = self.line;
            self.state = State::FieldStart;
        }
        if matches!(
            self.state,
            State::FieldStart | State::Unquoted | State::AfterQuote
        ) && !self.delim.is_empty()
        {
            if c == self.delim[self.delim_matched] {
                self.delim_matched += 1;
                if self.delim_matched == self.delim.len() {
                    self.delim_matched = 0;
                    self.end_field()?;
                    self.state = State::FieldStart;
                }
                return Ok(());
            }
            if self.delim_matched > 0 {
                self.flush_delimiter()?;
                return self.process(c);
            }
        }
        self.content(c)
    }

    /// The delimiter's characters held back were not a delimiter: the first is not one's
    /// start, the others are looked at again.
    fn flush_delimiter(&mut self) -> Result<(), RecordError> {
        let matched = mem::take(&mut self.delim_matched);
        if matched == 0 {
            return Ok(());
        }
        self.content(self.delim[0])?;
        for i in 1..matched {
            let d = self.delim[i];
            self.process(d)?;
        }
        // Held-back characters of a new partial match stay held back.
        Ok(())
    }

    /// One character that is not (the start of) a delimiter.
    fn content(&mut self, c: char) -> Result<(), RecordError> {
        let line_end = c == '\r' || c == '\n';
        match self.state {
            State::RecordStart | State::FieldStart => {
                if line_end {
                    self.end_field()?;
                    self.end_record();
                } else if c == self.dialect.quote {
                    self.field_line = self.line;
                    self.field_quoted = true;
                    self.state = State::Quoted;
                } else {
                    self.field_line = self.line;
                    self.state = State::Unquoted;
                    self.push_char(c)?;
                }
            }
            State::Comment => {
                if line_end {
                    self.state = State::RecordStart;
                }
            }
            State::Unquoted => {
                if line_end {
                    self.end_field()?;
                    self.end_record();
                } else if c == self.dialect.quote
                    && self.dialect.escape != self.dialect.quote
                    && self.field_text.ends_with(self.dialect.escape)
                {
                    // cqlsh's COPY TO writes a quote as `\"` without quoting the field; DSBulk
                    // quotes every field holding a quote, so it never writes this, and reading
                    // it as the quote cqlsh meant loses nothing of DSBulk's files.
                    self.field_text.pop();
                    self.field_units -= self.dialect.escape.len_utf16();
                    self.push_char(c)?;
                } else {
                    self.push_char(c)?;
                }
            }
            State::Quoted => {
                if c == self.dialect.quote {
                    self.state = State::QuoteInQuoted;
                } else if c == self.dialect.escape {
                    self.state = State::EscapeInQuoted;
                } else {
                    self.push_char(c)?;
                }
            }
            State::EscapeInQuoted => {
                if c != self.dialect.quote && c != self.dialect.escape {
                    self.push_char(self.dialect.escape)?;
                }
                self.push_char(c)?;
                self.state = State::Quoted;
            }
            State::QuoteInQuoted => {
                if c == self.dialect.quote {
                    self.push_char(c)?;
                    self.state = State::Quoted;
                } else {
                    self.state = State::AfterQuote;
                    return self.process(c);
                }
            }
            State::AfterQuote => {
                if line_end {
                    self.end_field()?;
                    self.end_record();
                } else if c == '\0' || c > ' ' {
                    return Err(RecordError::TextAfterQuote { line: self.line });
                }
                // Whitespace (univocity's `ch <= ' '`) after a closing quote is dropped.
            }
        }
        Ok(())
    }

    fn push_char(&mut self, c: char) -> Result<(), RecordError> {
        self.field_units += c.len_utf16();
        if self.field_units > self.limits.max_chars_per_field {
            return Err(RecordError::FieldTooLong {
                line: self.field_line,
                max: self.limits.max_chars_per_field,
            });
        }
        self.field_text.push(c);
        Ok(())
    }

    fn end_field(&mut self) -> Result<(), RecordError> {
        if self.fields.len() >= self.limits.max_fields {
            return Err(RecordError::TooManyFields {
                line: self.record_line,
                max: self.limits.max_fields,
            });
        }
        self.fields.push(Field {
            text: mem::take(&mut self.field_text),
            quoted: mem::take(&mut self.field_quoted),
        });
        self.field_units = 0;
        Ok(())
    }

    fn end_record(&mut self) {
        self.ready.push(Record {
            line: self.record_line,
            fields: mem::take(&mut self.fields),
        });
        self.state = State::RecordStart;
    }
}

/// The length of the UTF-8 character a lead byte starts (1 for a byte that starts none: it
/// is then refused on its own).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn write(records: &[Vec<Option<&str>>], dialect: &Dialect) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            write_record(&mut out, r, dialect);
        }
        out
    }

    fn limits() -> Limits {
        Limits::default()
    }

    /// Parses `input` pushed in the given chunks.
    fn parse_chunks(
        chunks: &[&[u8]],
        dialect: &Dialect,
        limits: Limits,
    ) -> Result<Vec<Record>, RecordError> {
        let mut p = Parser::new(dialect.clone(), limits);
        let mut out = Vec::new();
        for c in chunks {
            p.push(c, &mut out)?;
        }
        p.finish(&mut out)?;
        Ok(out)
    }

    fn parse(input: &[u8]) -> Result<Vec<Record>, RecordError> {
        parse_chunks(&[input], &Dialect::default(), limits())
    }

    fn parse_with(input: &[u8], dialect: &Dialect) -> Result<Vec<Record>, RecordError> {
        parse_chunks(&[input], dialect, limits())
    }

    /// Records as values (null as `None`).
    fn values(records: &[Record]) -> Vec<Vec<Option<String>>> {
        values_in(records, &Dialect::default())
    }

    /// Records as values, null (an empty field or `dialect`'s null_value, unquoted) as `None`.
    fn values_in(records: &[Record], dialect: &Dialect) -> Vec<Vec<Option<String>>> {
        records
            .iter()
            .map(|r| {
                r.fields
                    .iter()
                    .map(|f| (!f.is_null(&dialect.null_value)).then(|| f.text.clone()))
                    .collect()
            })
            .collect()
    }

    fn lines(records: &[Record]) -> Vec<u64> {
        records.iter().map(|r| r.line).collect()
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_owned())
    }

    fn unquoted(text: &str) -> Field {
        Field {
            text: text.to_owned(),
            quoted: false,
        }
    }

    fn quoted(text: &str) -> Field {
        Field {
            text: text.to_owned(),
            quoted: true,
        }
    }

    /// What reading gives back for written records: empty lines (a record of no fields or of
    /// one null) are skipped.
    fn expected(records: &[Vec<Option<String>>]) -> Vec<Vec<Option<String>>> {
        expected_in(records, &Dialect::default())
    }

    /// The records that read back (empty lines are skipped) with `dialect`.
    fn expected_in(records: &[Vec<Option<String>>], dialect: &Dialect) -> Vec<Vec<Option<String>>> {
        records
            .iter()
            .filter(|r| {
                !(r.is_empty() || (r.len() == 1 && r[0].is_none() && dialect.null_value.is_empty()))
            })
            .cloned()
            .collect()
    }

    fn borrowed(records: &[Vec<Option<String>>]) -> Vec<Vec<Option<&str>>> {
        records
            .iter()
            .map(|r| r.iter().map(|f| f.as_deref()).collect())
            .collect()
    }

    /// A sample that exercises every rule, written by `write_record`.
    fn sample() -> Vec<Vec<Option<String>>> {
        vec![
            vec![s("a"), None, s("")],
            vec![s("say \"hi\""), s("x\\y"), s("line\nbreak"), s("crlf\r\nx")],
            vec![s(" lead"), s("trail "), s("a,b"), s("\"starts")],
            vec![s("é😀中"), s("\\"), s("\\\""), s("end\\")],
            vec![s("")],
            vec![None, None],
            vec![s("lone\rcr"), s("#not a comment")],
        ]
    }

    // ---- writing ----

    #[test]
    fn null_is_written_as_nothing_and_the_empty_string_as_two_quotes() {
        let out = write(&[vec![Some("a"), None, Some("")]], &Dialect::default());
        assert_eq!(out, b"a,,\"\"\n");
    }

    #[test]
    fn null_value_is_written_for_null_and_a_text_equal_to_it_is_quoted() {
        let d = Dialect {
            null_value: "NULL".to_owned(),
            ..Dialect::default()
        };
        let records = vec![
            vec![Some("a"), None, Some("NULL"), Some(""), Some("NULLx")],
            vec![None],
        ];
        let out = write(&records, &d);
        assert_eq!(out, b"a,NULL,\"NULL\",\"\",NULLx\nNULL\n");
        let r = parse_with(&out, &d).unwrap();
        assert_eq!(
            values_in(&r, &d),
            vec![
                vec![s("a"), None, s("NULL"), s(""), s("NULLx")],
                vec![None]
            ]
        );
        // An empty field is null too.
        let r = parse_with(b"NULL,,\"\"\n", &d).unwrap();
        assert_eq!(values_in(&r, &d), vec![vec![None, None, s("")]]);
    }

    #[test]
    fn a_quote_is_escaped_with_a_backslash_inside_quotes() {
        let out = write(&[vec![Some("say \"hi\"")]], &Dialect::default());
        assert_eq!(out, b"\"say \\\"hi\\\"\"\n");
    }

    #[test]
    fn a_backslash_in_an_unquoted_field_stays_as_it_is() {
        let out = write(&[vec![Some("x\\y"), Some("\\")]], &Dialect::default());
        assert_eq!(out, b"x\\y,\\\n");
    }

    #[test]
    fn a_backslash_inside_quotes_is_doubled() {
        let out = write(&[vec![Some("a,\\b")]], &Dialect::default());
        assert_eq!(out, b"\"a,\\\\b\"\n");
    }

    #[test]
    fn a_field_with_a_newline_or_cr_is_quoted_and_the_newline_written_raw() {
        let out = write(
            &[vec![Some("a\nb"), Some("c\rd"), Some("e\r\nf")]],
            &Dialect::default(),
        );
        assert_eq!(out, b"\"a\nb\",\"c\rd\",\"e\r\nf\"\n");
    }

    #[test]
    fn spaces_do_not_cause_quoting_but_delimiters_and_quotes_do() {
        let out = write(
            &[vec![
                Some(" a "),
                Some("a,b"),
                Some("\"x"),
                Some("x\"y"),
                Some("\t"),
            ]],
            &Dialect::default(),
        );
        assert_eq!(out, b" a ,\"a,b\",\"\\\"x\",\"x\\\"y\",\t\n");
    }

    #[test]
    fn a_multi_character_delimiter_separates_and_causes_quoting() {
        let d = Dialect {
            delimiter: "||".to_owned(),
            ..Dialect::default()
        };
        let out = write(&[vec![Some("a|b"), None, Some("c||d"), Some("e")]], &d);
        assert_eq!(out, b"a|b||||\"c||d\"||e\n");
    }

    #[test]
    fn a_field_whose_end_and_the_delimiter_hold_a_delimiter_is_quoted() {
        let d = Dialect {
            delimiter: "|;|".to_owned(),
            ..Dialect::default()
        };
        let out = write(
            &[vec![Some("a|;"), Some("b|"), Some("c|;x"), Some("|;")]],
            &d,
        );
        assert_eq!(out, b"\"a|;\"|;|b||;|c|;x|;||;\n");
        assert_eq!(
            values(&parse_with(&out, &d).unwrap()),
            vec![vec![s("a|;"), s("b|"), s("c|;x"), s("|;")]]
        );
    }

    #[test]
    fn a_first_field_starting_with_the_comment_char_is_quoted_when_comments_are_on() {
        let on = Dialect {
            comment: Some('#'),
            ..Dialect::default()
        };
        assert_eq!(write(&[vec![Some("#x"), Some("#y")]], &on), b"\"#x\",#y\n");
        assert_eq!(write(&[vec![Some("#x")]], &Dialect::default()), b"#x\n");
    }

    #[test]
    fn an_escape_equal_to_the_quote_doubles_quotes() {
        let d = Dialect {
            escape: '"',
            ..Dialect::default()
        };
        let out = write(&[vec![Some("a\"b\\c,")]], &d);
        assert_eq!(out, b"\"a\"\"b\\c,\"\n");
        assert_eq!(
            values(&parse_with(&out, &d).unwrap()),
            vec![vec![s("a\"b\\c,")]]
        );
    }

    // ---- reading DSBulk's forms ----

    #[test]
    fn dsbulk_null_and_empty_read_back_as_unquoted_empty_and_quoted_empty() {
        let r = parse(b"a,,\"\"\n").unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].line, 1);
        assert_eq!(r[0].fields, vec![unquoted("a"), unquoted(""), quoted("")]);
        assert_eq!(values(&r), vec![vec![s("a"), None, s("")]]);
    }

    #[test]
    fn an_escaped_quote_inside_quotes_is_a_quote() {
        let r = parse(br#""say \"hi\"""#).unwrap();
        assert_eq!(r[0].fields, vec![quoted("say \"hi\"")]);
    }

    #[test]
    fn an_unquoted_backslash_is_literal_but_before_a_quote() {
        let r = parse(b"x\\y,\\\\,a\\\"b\n").unwrap();
        assert_eq!(
            r[0].fields,
            vec![unquoted("x\\y"), unquoted("\\\\"), unquoted("a\"b")]
        );
    }

    #[test]
    fn a_quoted_newline_is_part_of_the_field_and_advances_the_line() {
        let r = parse(b"\"a\nb\",c\r\n\"x\r\ny\rz\"\nlast\n").unwrap();
        assert_eq!(
            values(&r),
            vec![
                vec![s("a\nb"), s("c")],
                vec![s("x\r\ny\rz")],
                vec![s("last")]
            ]
        );
        assert_eq!(lines(&r), vec![1, 3, 6]);
    }

    #[test]
    fn a_doubled_quote_inside_quotes_is_a_quote() {
        let r = parse(b"\"say \"\"hi\"\"\",\"\"\"\",\"a\"\"\"\n").unwrap();
        assert_eq!(
            r[0].fields,
            vec![quoted("say \"hi\""), quoted("\""), quoted("a\"")]
        );
    }

    #[test]
    fn an_escaped_escape_is_one_and_an_escape_before_anything_else_is_kept() {
        let r = parse(b"\"a\\\\b\",\"a\\nb\",\"\\x\",\"\\\\\\\"\"\n").unwrap();
        assert_eq!(
            r[0].fields,
            vec![
                quoted("a\\b"),
                quoted("a\\nb"),
                quoted("\\x"),
                quoted("\\\"")
            ]
        );
    }

    #[test]
    fn cqlsh_files_with_crlf_and_unquoted_escaped_quotes_are_read_as_cqlsh_meant() {
        // cqlsh COPY TO: `"` written `\"` and `\` written `\\` without quoting; quoting only
        // for the delimiter, CR or LF; null and empty both nothing; lines end with CRLF.
        let file = b"1,say \\\"hi\\\",\r\n2,\"a,b\",c:\\\\d\r\n3,\"two\r\nlines\",\r\n";
        let r = parse(file).unwrap();
        assert_eq!(
            r.iter().map(|r| r.fields.clone()).collect::<Vec<_>>(),
            vec![
                vec![unquoted("1"), unquoted("say \"hi\""), unquoted("")],
                vec![unquoted("2"), quoted("a,b"), unquoted("c:\\\\d")],
                vec![unquoted("3"), quoted("two\r\nlines"), unquoted("")],
            ]
        );
        assert_eq!(lines(&r), vec![1, 2, 3]);
    }

    #[test]
    fn lines_end_at_lf_crlf_and_a_lone_cr_and_empty_lines_are_skipped() {
        let r = parse(b"a\nb\r\nc\rd\n\n\r\n\r\re\n").unwrap();
        assert_eq!(
            values(&r),
            vec![
                vec![s("a")],
                vec![s("b")],
                vec![s("c")],
                vec![s("d")],
                vec![s("e")]
            ]
        );
        assert_eq!(lines(&r), vec![1, 2, 3, 4, 9]);
    }

    #[test]
    fn whitespace_around_unquoted_fields_is_kept_and_after_a_closing_quote_dropped() {
        let r = parse(b" a , b\t,\"q\"  \t, \"x\"\n   \n").unwrap();
        assert_eq!(
            r[0].fields,
            vec![
                unquoted(" a "),
                unquoted(" b\t"),
                quoted("q"),
                unquoted(" \"x\"")
            ]
        );
        // A line of spaces is a record of one field, not an empty line.
        assert_eq!(r[1].fields, vec![unquoted("   ")]);
    }

    #[test]
    fn a_quote_inside_an_unquoted_field_is_literal() {
        let r = parse(b"a\"b,c\"\n").unwrap();
        assert_eq!(r[0].fields, vec![unquoted("a\"b"), unquoted("c\"")]);
    }

    #[test]
    fn comment_lines_are_skipped_only_when_a_comment_char_is_set() {
        let input = b"#c1\na,#b\n#c2\r\n\"#q\"\n";
        let on = Dialect {
            comment: Some('#'),
            ..Dialect::default()
        };
        let r = parse_with(input, &on).unwrap();
        assert_eq!(values(&r), vec![vec![s("a"), s("#b")], vec![s("#q")]]);
        assert_eq!(lines(&r), vec![2, 4]);
        let r = parse(input).unwrap();
        assert_eq!(r.len(), 4);
        assert_eq!(values(&r)[0], vec![s("#c1")]);
    }

    #[test]
    fn a_bom_is_skipped_at_the_very_start_only() {
        let r = parse(b"\xef\xbb\xbfa,b\n\xef\xbb\xbfc\n").unwrap();
        assert_eq!(values(&r), vec![vec![s("a"), s("b")], vec![s("\u{feff}c")]]);
        let r = parse_chunks(
            &[b"\xef", b"\xbb", b"\xbf\"q\"\n"],
            &Dialect::default(),
            limits(),
        )
        .unwrap();
        assert_eq!(r[0].fields, vec![quoted("q")]);
    }

    #[test]
    fn the_last_record_needs_no_newline_and_a_trailing_delimiter_is_a_null() {
        assert_eq!(
            values(&parse(b"a\nb").unwrap()),
            vec![vec![s("a")], vec![s("b")]]
        );
        assert_eq!(values(&parse(b"a,").unwrap()), vec![vec![s("a"), None]]);
        assert_eq!(values(&parse(b"\"a\"").unwrap()), vec![vec![s("a")]]);
        assert_eq!(values(&parse(b"\"a\"  ").unwrap()), vec![vec![s("a")]]);
        assert_eq!(values(&parse(b",").unwrap()), vec![vec![None, None]]);
        assert!(parse(b"").unwrap().is_empty());
        assert!(parse(b"\n\r\n").unwrap().is_empty());
    }

    #[test]
    fn a_multi_character_delimiter_is_found_across_chunks_and_near_misses_are_text() {
        let d = Dialect {
            delimiter: "|;|".to_owned(),
            ..Dialect::default()
        };
        let input = b"a|;b|;|c|;;|;|\"q\" |;||;|x|\n|;|\"|;|\"|;||;";
        let want = vec![
            vec![s("a|;b"), s("c|;;"), s("q"), None, s("x|")],
            vec![None, s("|;|"), s("|;")],
        ];
        for at in 0..=input.len() {
            let r = parse_chunks(&[&input[..at], &input[at..]], &d, limits()).unwrap();
            assert_eq!(values(&r), want, "split at {at}");
        }
        let ones: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(values(&parse_chunks(&ones, &d, limits()).unwrap()), want);
    }

    #[test]
    fn a_delimiter_starting_with_a_space_is_matched_before_whitespace_after_a_quote() {
        let d = Dialect {
            delimiter: " | ".to_owned(),
            ..Dialect::default()
        };
        let r = parse_with(b"\"a\" | b |  \"c\"  | d\n", &d).unwrap();
        assert_eq!(
            r[0].fields,
            vec![
                quoted("a"),
                unquoted("b"),
                unquoted(" \"c\" "),
                unquoted("d")
            ]
        );
        let r = parse_with(b"\"a\"  | b\n", &d).unwrap();
        assert_eq!(r[0].fields, vec![quoted("a"), unquoted("b")]);
    }

    #[test]
    fn written_sample_parses_back_at_every_split_and_in_one_byte_chunks() {
        let records = sample();
        let bytes = write(&borrowed(&records), &Dialect::default());
        let want = expected(&records);
        for at in 0..=bytes.len() {
            let r =
                parse_chunks(&[&bytes[..at], &bytes[at..]], &Dialect::default(), limits()).unwrap();
            assert_eq!(values(&r), want, "split at {at}");
        }
        let ones: Vec<&[u8]> = bytes.chunks(1).collect();
        let r = parse_chunks(&ones, &Dialect::default(), limits()).unwrap();
        assert_eq!(values(&r), want);
        assert_eq!(lines(&r), vec![1, 2, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn bytes_counts_everything_pushed() {
        let mut p = Parser::new(Dialect::default(), limits());
        let mut out = Vec::new();
        p.push(b"ab,\xc3", &mut out).unwrap();
        assert_eq!(p.bytes(), 4);
        p.push(b"\xa9\nx", &mut out).unwrap();
        assert_eq!(p.bytes(), 7);
        assert_eq!(values(&out), vec![vec![s("ab"), s("é")]]);
        p.finish(&mut out).unwrap();
        assert_eq!(p.bytes(), 7);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn records_before_an_error_are_handed_out() {
        let mut p = Parser::new(Dialect::default(), limits());
        let mut out = Vec::new();
        let e = p.push(b"a\nb\n\"c\"d\n", &mut out).unwrap_err();
        assert_eq!(e, RecordError::TextAfterQuote { line: 3 });
        assert_eq!(values(&out), vec![vec![s("a")], vec![s("b")]]);
    }

    // ---- errors ----

    #[test]
    fn a_quoted_field_never_closed_names_the_line_it_began_on() {
        let e = parse(b"a\nb,\"c\nd\ne").unwrap_err();
        assert_eq!(e, RecordError::UnclosedQuote { line: 2 });
        assert_eq!(e.to_string(), "line 2: a quoted field is never closed");
        // An escaped quote does not close it.
        let e = parse(b"x\n\"abc\\\"").unwrap_err();
        assert_eq!(e, RecordError::UnclosedQuote { line: 2 });
    }

    #[test]
    fn text_after_a_closing_quote_names_its_line() {
        let e = parse(b"a\n\"b\nc\"x\n").unwrap_err();
        assert_eq!(e, RecordError::TextAfterQuote { line: 3 });
        assert_eq!(e.to_string(), "line 3: text after a closing quote");
        let e = parse(b"\"a\" b,c\n").unwrap_err();
        assert_eq!(e.line(), 1);
    }

    #[test]
    fn bytes_that_are_not_utf8_name_their_line() {
        let e = parse(b"a\nb\n\"c\nd\xffe\"\n").unwrap_err();
        assert_eq!(e, RecordError::NotUtf8 { line: 4 });
        assert_eq!(e.to_string(), "line 4: not UTF-8");
        // A bad continuation across chunks.
        let e = parse_chunks(&[b"a\n\xc3", b"x\n"], &Dialect::default(), limits()).unwrap_err();
        assert_eq!(e, RecordError::NotUtf8 { line: 2 });
        // A character cut off by the end of input.
        let e = parse(b"a\nb\xe2\x82").unwrap_err();
        assert_eq!(e, RecordError::NotUtf8 { line: 2 });
        // A stray continuation byte.
        let e = parse(b"\x80").unwrap_err();
        assert_eq!(e, RecordError::NotUtf8 { line: 1 });
    }

    #[test]
    fn a_field_too_long_names_its_line_and_the_limit() {
        let mut input = b"a\n\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 4097));
        let e = parse(&input).unwrap_err();
        assert_eq!(e, RecordError::FieldTooLong { line: 3, max: 4096 });
        assert_eq!(
            e.to_string(),
            "line 3: a field longer than 4096 characters (maxCharsPerColumn)"
        );
    }

    #[test]
    fn too_many_fields_names_the_records_line_and_the_limit() {
        let mut input = b"a\n\n\"x\ny\"".to_vec();
        input.extend(std::iter::repeat_n(b',', 512));
        let e = parse(&input).unwrap_err();
        assert_eq!(e, RecordError::TooManyFields { line: 3, max: 512 });
        assert_eq!(e.to_string(), "line 3: more than 512 fields (maxColumns)");
    }

    // ---- limits ----

    fn small(max_chars_per_field: usize, max_fields: usize) -> Limits {
        Limits {
            max_chars_per_field,
            max_fields,
        }
    }

    #[test]
    fn a_field_of_exactly_max_chars_is_accepted_and_one_more_refused() {
        let d = Dialect::default();
        for (ok, bad) in [
            (&b"abcd"[..], &b"abcde"[..]),
            (b"\"abcd\"", b"\"abcde\""),
            (b"\"a\\\"\\\\d\"", b"\"a\\\"\\\\de\""),
            (b"\"a\"\"cd\"", b"\"a\"\"cde\""),
            ("éé中中".as_bytes(), "éé中中x".as_bytes()),
            // Outside the BMP a character counts two, as in Java.
            ("😀😀".as_bytes(), "😀😀x".as_bytes()),
        ] {
            let r = parse_chunks(&[ok, b"\n"], &d, small(4, 8)).unwrap();
            assert_eq!(r.len(), 1);
            assert_eq!(
                r[0].fields[0].text.encode_utf16().count(),
                4,
                "{:?}",
                String::from_utf8_lossy(ok)
            );
            let e = parse_chunks(&[bad, b"\n"], &d, small(4, 8)).unwrap_err();
            assert_eq!(e, RecordError::FieldTooLong { line: 1, max: 4 });
        }
        let e = parse_chunks(&["😀😀😀".as_bytes()], &d, small(5, 8)).unwrap_err();
        assert_eq!(e, RecordError::FieldTooLong { line: 1, max: 5 });
    }

    #[test]
    fn a_field_too_long_is_refused_at_once_without_the_rest() {
        let mut p = Parser::new(Dialect::default(), small(4, 8));
        let mut out = Vec::new();
        let e = p.push(b"\"abcde", &mut out).unwrap_err();
        assert_eq!(e, RecordError::FieldTooLong { line: 1, max: 4 });
        assert!(p.field_text.len() <= 4);
    }

    #[test]
    fn a_record_of_exactly_max_fields_is_accepted_and_one_more_refused() {
        let d = Dialect::default();
        for (ok, bad) in [
            (&b"a,b,c"[..], &b"a,b,c,d"[..]),
            (b",,", b",,,"),
            (b"\"a\",\"b\",\"c\"", b"\"a\",\"b\",\"c\","),
        ] {
            let r = parse_chunks(&[ok, b"\n"], &d, small(10, 3)).unwrap();
            assert_eq!(r[0].fields.len(), 3);
            let e = parse_chunks(&[b"x\n", bad, b"\n"], &d, small(10, 3)).unwrap_err();
            assert_eq!(e, RecordError::TooManyFields { line: 2, max: 3 });
        }
    }

    #[test]
    fn the_default_limits_are_dsbulks() {
        assert_eq!(
            Limits::default(),
            Limits {
                max_chars_per_field: 4096,
                max_fields: 512
            }
        );
        let mut ok = vec![b'x'; 4096];
        ok.push(b'\n');
        ok.extend(std::iter::repeat_n(b',', 511));
        let r = parse(&ok).unwrap();
        assert_eq!(r[0].fields[0].text.len(), 4096);
        assert_eq!(r[1].fields.len(), 512);
    }

    // ---- round trips ----

    /// Characters that matter to the format, and any other (no BOM: a leading U+FEFF in the
    /// first field of a file is read as a BOM).
    fn field_char() -> impl Strategy<Value = char> {
        prop_oneof![
            4 => prop::sample::select(vec![
                ',', '"', '\\', '\r', '\n', ' ', '\t', '#', '|', ';', 'a', 'é', '中', '😀', '\0',
            ]),
            1 => any::<char>().prop_filter("no BOM", |c| *c != '\u{feff}'),
        ]
    }

    fn field() -> impl Strategy<Value = Option<String>> {
        prop::option::weighted(
            0.8,
            prop::collection::vec(field_char(), 0..8).prop_map(|v| v.into_iter().collect()),
        )
    }

    fn records() -> impl Strategy<Value = Vec<Vec<Option<String>>>> {
        prop::collection::vec(prop::collection::vec(field(), 0..6), 0..6)
    }

    fn dialect() -> impl Strategy<Value = Dialect> {
        prop_oneof![
            Just(Dialect::default()),
            Just(Dialect {
                delimiter: "|;|".to_owned(),
                ..Dialect::default()
            }),
            Just(Dialect {
                delimiter: ";".to_owned(),
                comment: Some('#'),
                ..Dialect::default()
            }),
            Just(Dialect {
                delimiter: "\t".to_owned(),
                escape: '"',
                ..Dialect::default()
            }),
            // `a` is one of the characters fields are made of: texts equal to it are common.
            Just(Dialect {
                delimiter: ";".to_owned(),
                null_value: "a".to_owned(),
                ..Dialect::default()
            }),
        ]
    }

    proptest! {
        #[test]
        fn random_records_round_trip(records in records(), dialect in dialect()) {
            let bytes = write(&borrowed(&records), &dialect);
            let r = parse_with(&bytes, &dialect).unwrap();
            prop_assert_eq!(values_in(&r, &dialect), expected_in(&records, &dialect));
        }

        #[test]
        fn random_records_round_trip_in_random_chunks(
            records in records(),
            dialect in dialect(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let bytes = write(&borrowed(&records), &dialect);
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            at.push(0);
            at.push(bytes.len());
            at.sort_unstable();
            let chunks: Vec<&[u8]> = at.windows(2).map(|w| &bytes[w[0]..w[1]]).collect();
            let r = parse_chunks(&chunks, &dialect, limits()).unwrap();
            prop_assert_eq!(values_in(&r, &dialect), expected_in(&records, &dialect));
        }

        #[test]
        fn random_records_round_trip_in_one_byte_chunks(records in records(), dialect in dialect()) {
            let bytes = write(&borrowed(&records), &dialect);
            let chunks: Vec<&[u8]> = bytes.chunks(1).collect();
            let r = parse_chunks(&chunks, &dialect, limits()).unwrap();
            prop_assert_eq!(values_in(&r, &dialect), expected_in(&records, &dialect));
        }

        #[test]
        fn random_bytes_never_panic_and_chunking_does_not_change_the_answer(
            bytes in prop::collection::vec(
                prop_oneof![prop::sample::select(b",\"\\\r\n a#\xc3\xa9".to_vec()), any::<u8>()],
                0..40,
            ),
            cut in any::<prop::sample::Index>(),
        ) {
            let at = cut.index(bytes.len() + 1);
            let whole = parse_chunks(&[&bytes], &Dialect::default(), small(6, 4));
            let split = parse_chunks(&[&bytes[..at], &bytes[at..]], &Dialect::default(), small(6, 4));
            prop_assert_eq!(whole, split);
        }
    }
}
