//! YAML helpers shared by every config format drover reads (daemon config now, job files later):
//! error messages that name the key path and the line, the way an operator looks for them, and
//! a bound on what aliases may expand to.

use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The most nodes (scalars, sequences, mappings) a YAML document may hold once its aliases are
/// expanded. A real job file or daemon config holds a few hundred; a "billion laughs" document
/// of nested aliases holds millions from a few kilobytes, and building them as values took 2 GB.
/// At this bound a document's values stay in the tens of megabytes.
pub const MAX_NODES: usize = 250_000;

/// The deepest nesting of flow collections (`[`, `{`) a YAML document (and so a JSON one) may
/// have. The YAML parser's time grows with the square of that depth — 255 s for one 400 KB
/// body of 200,000 brackets — and its deserializer refuses more than 128 levels anyway, after
/// paying for all of them. A job file nests a handful.
pub const MAX_DEPTH: usize = 64;

/// Parses YAML as `T` after checking, without building any value, that the document nests at
/// most [`MAX_DEPTH`] flow collections and holds at most [`MAX_NODES`] nodes with every alias
/// expanded. Every YAML input drover reads goes through here rather than `yaml_serde::from_str`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, yaml_serde::Error> {
    if let Some(line) = too_deep(text) {
        return Err(<yaml_serde::Error as serde::de::Error>::custom(format!(
            "line {line}: flow collections ([ ], {{ }}) nested more than {MAX_DEPTH} deep; \
             drover refuses the document rather than parse it"
        )));
    }
    let mut left = MAX_NODES;
    Budget(&mut left).deserialize(yaml_serde::Deserializer::from_str(text))?;
    yaml_serde::from_str(text)
}

/// The line (1-based) at which `text` first nests flow collections deeper than [`MAX_DEPTH`],
/// read off the raw text in one pass, as the YAML scanner would read its brackets. Wherever
/// this reading could differ from the scanner's, it counts a bracket the scanner might not
/// (a refusal of a document with dozens of brackets in one plain scalar), never the other way
/// round: the parser cannot be made to nest deeper than this counts.
fn too_deep(text: &str) -> Option<usize> {
    #[derive(PartialEq)]
    enum At {
        /// Where a token may start: a quote there opens a quoted scalar.
        TokenStart,
        /// Inside a plain scalar, or just after any other token.
        Within,
        /// Just after a quoted scalar ended: a `:` there is a value indicator (`"a":"b"`).
        AfterQuoted,
        /// In an anchor, alias or tag (`&a`, `*a`, `!t`): the node's own token starts after it.
        Property,
    }
    let b = text.as_bytes();
    let (mut depth, mut line, mut i) = (0usize, 1usize, 0usize);
    let mut at = At::TokenStart;
    let blank = |c: Option<&u8>| matches!(c, None | Some(b' ' | b'\t' | b'\r' | b'\n'));
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1);
        match c {
            b'\n' => {
                line += 1;
                // In block context a new line may start a token; in flow context a plain
                // scalar may go on over lines.
                if depth == 0 || at != At::Within {
                    at = At::TokenStart;
                }
            }
            b' ' | b'\t' | b'\r' => {
                if depth == 0 || at == At::Property {
                    // In block context, a token starts after blanks (a quote inside a plain
                    // scalar is then taken for an opener: it is closed by the end of the line).
                    at = At::TokenStart;
                }
            }
            b'#' if i == 0 || blank(b.get(i - 1)) => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\'' | b'"' if at == At::TokenStart => {
                // A quoted scalar: `''` escapes a single quote, `\` anything in a double-quoted
                // one. In block context it is taken to end with its line at the latest: brackets
                // on the lines after then count (never fewer than the scanner's).
                i += 1;
                while i < b.len() {
                    let q = b[i];
                    if q == b'\n' {
                        if depth == 0 {
                            break;
                        }
                        line += 1;
                    } else if c == b'"' && q == b'\\' {
                        i += 1;
                    } else if q == c {
                        if c == b'\'' && b.get(i + 1) == Some(&b'\'') {
                            i += 1;
                        } else {
                            break;
                        }
                    }
                    i += 1;
                }
                if i < b.len() && b[i] == b'\n' {
                    continue;
                }
                at = At::AfterQuoted;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(line);
                }
                at = At::TokenStart;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                at = At::Within;
            }
            b',' if depth > 0 => at = At::TokenStart,
            b':' if at == At::AfterQuoted
                || blank(next)
                || (depth > 0 && matches!(next, Some(b',' | b'[' | b']' | b'{' | b'}'))) =>
            {
                at = At::TokenStart;
            }
            b'?' | b'-' if at == At::TokenStart && blank(next) => {}
            b'&' | b'*' | b'!' if at == At::TokenStart => at = At::Property,
            _ if at == At::Property => {}
            _ => at = At::Within,
        }
        i += 1;
    }
    None
}

/// Walks a document node by node (the parser replays an alias's events rather than copying
/// them, so memory stays that of the text) and fails once the budget is spent.
struct Budget<'a>(&'a mut usize);

impl<'de> DeserializeSeed<'de> for Budget<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Budget<'_> {
    fn spend<E: serde::de::Error>(&mut self) -> Result<(), E> {
        match self.0.checked_sub(1) {
            Some(left) => {
                *self.0 = left;
                Ok(())
            }
            None => Err(E::custom(format!(
                "the document holds more than {MAX_NODES} nodes once its aliases are expanded; \
                 drover refuses it rather than build it"
            ))),
        }
    }
}

impl<'de> Visitor<'de> for Budget<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML node")
    }
    fn visit_bool<E: serde::de::Error>(mut self, _: bool) -> Result<(), E> {
        self.spend()
    }
    fn visit_i64<E: serde::de::Error>(mut self, _: i64) -> Result<(), E> {
        self.spend()
    }
    fn visit_i128<E: serde::de::Error>(mut self, _: i128) -> Result<(), E> {
        self.spend()
    }
    fn visit_u64<E: serde::de::Error>(mut self, _: u64) -> Result<(), E> {
        self.spend()
    }
    fn visit_u128<E: serde::de::Error>(mut self, _: u128) -> Result<(), E> {
        self.spend()
    }
    fn visit_f64<E: serde::de::Error>(mut self, _: f64) -> Result<(), E> {
        self.spend()
    }
    fn visit_str<E: serde::de::Error>(mut self, _: &str) -> Result<(), E> {
        self.spend()
    }
    fn visit_bytes<E: serde::de::Error>(mut self, _: &[u8]) -> Result<(), E> {
        self.spend()
    }
    fn visit_unit<E: serde::de::Error>(mut self) -> Result<(), E> {
        self.spend()
    }
    fn visit_none<E: serde::de::Error>(mut self) -> Result<(), E> {
        self.spend()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.spend()?;
        while seq.next_element_seed(Budget(&mut *self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.spend()?;
        while map.next_key_seed(Budget(&mut *self.0))?.is_some() {
            map.next_value_seed(Budget(&mut *self.0))?;
        }
        Ok(())
    }
    fn visit_enum<A: serde::de::EnumAccess<'de>>(mut self, data: A) -> Result<(), A::Error> {
        use serde::de::VariantAccess;
        self.spend()?;
        let ((), variant) = data.variant_seed(Budget(&mut *self.0))?;
        variant.newtype_variant_seed(Budget(&mut *self.0))
    }
}

/// Deserializes a string through `parse`. Going through a visitor (instead of deserializing a
/// `String` and checking it afterwards) makes the YAML parser attach the key path and line of
/// the value itself to the error, not those of the enclosing section.
pub fn parse_str<'de, D, T>(d: D, parse: fn(&str) -> Result<T, String>) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Visit<T>(fn(&str) -> Result<T, String>);
    impl<T> serde::de::Visitor<'_> for Visit<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
            (self.0)(v).map_err(E::custom)
        }
    }
    d.deserialize_str(Visit(parse))
}

/// Turns a `yaml_serde` error into `(message, line)`. The crate already prefixes the message
/// with the key path (`server.listen: ...`); its location suffix is replaced by a line number
/// because operators look for the line, not the column.
pub fn describe_error(err: &yaml_serde::Error) -> (String, Option<usize>) {
    let text = err.to_string();
    match err.location() {
        Some(loc) => {
            let suffix = format!(" at line {} column {}", loc.line(), loc.column());
            let message = text.strip_suffix(&suffix).unwrap_or(&text).to_string();
            (message, Some(loc.line()))
        }
        None => (text, None),
    }
}

/// Finds the line (1-based) where a dotted key path such as `cassandra.hints_directory` is
/// written, for errors found after parsing (files that do not exist, conflicting keys).
///
/// This reads block-style YAML, which is what config files are written in; a key written in
/// flow style (`{a: 1}`) is not found and the error then simply carries no line.
pub fn line_of(src: &str, path: &str) -> Option<usize> {
    let wanted: Vec<&str> = path
        .split('.')
        .map(|seg| seg.split('[').next().unwrap_or(seg))
        .collect();
    let mut stack: Vec<(usize, String)> = Vec::new();
    for (index, raw) in src.lines().enumerate() {
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('-') {
            continue;
        }
        let indent = raw.len() - trimmed.len();
        let Some(colon) = trimmed.find(':') else {
            continue;
        };
        let key = trimmed[..colon]
            .trim()
            .trim_matches(|c| c == '"' || c == '\'');
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        stack.push((indent, key.to_string()));
        if stack.len() == wanted.len() && stack.iter().zip(&wanted).all(|((_, k), w)| k == w) {
            return Some(index + 1);
        }
    }
    None
}

/// JSON text as the YAML parser reads it. JSON writes a character beyond the Basic
/// Multilingual Plane (an emoji) as a surrogate pair, `\uD83D\uDE00`, which the YAML parser
/// refuses; YAML writes it `\U0001F600`. Each pair inside a string is rewritten so, on the
/// same line, so line numbers in errors stay right; nothing else changes. A lone surrogate is
/// left for the parser to refuse, as JSON does.
pub fn json_for_yaml(text: &str) -> std::borrow::Cow<'_, str> {
    fn surrogate(hex: &[u8], range: std::ops::RangeInclusive<u32>) -> Option<u32> {
        let hex = std::str::from_utf8(hex).ok()?;
        let unit = u32::from_str_radix(hex, 16).ok()?;
        range.contains(&unit).then_some(unit)
    }
    let bytes = text.as_bytes();
    if !text.contains("\\u") {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => in_string = !in_string,
            b'\\' if in_string => {
                // `\uHHHH\uLLLL` with a high then a low surrogate.
                let pair = bytes.get(i + 1) == Some(&b'u')
                    && bytes.get(i + 6..i + 8) == Some(b"\\u".as_slice());
                let high = pair.then(|| surrogate(&bytes[i + 2..i + 6], 0xD800..=0xDBFF));
                let low = bytes
                    .get(i + 8..i + 12)
                    .and_then(|hex| surrogate(hex, 0xDC00..=0xDFFF));
                if let (Some(Some(high)), Some(low)) = (high, low) {
                    let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                    out.push_str(&text[copied..i]);
                    out.push_str(&format!("\\U{code:08X}"));
                    i += 12;
                    copied = i;
                    continue;
                }
                // Any other escape: its character is not a quote that ends the string.
                i += 2;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    if copied == 0 {
        return text.into();
    }
    out.push_str(&text[copied..]);
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deep(n: usize) -> String {
        "[".repeat(n) + &"]".repeat(n)
    }

    #[test]
    fn flow_nesting_is_refused_past_the_bound_and_taken_at_it() {
        assert_eq!(too_deep(&deep(MAX_DEPTH)), None);
        assert_eq!(too_deep(&deep(MAX_DEPTH + 1)), Some(1));
        let json = format!("{{\"a\":\n{}}}", deep(MAX_DEPTH - 1));
        assert_eq!(too_deep(&json), None);
        let json = format!("{{\"a\":\n{}}}", deep(MAX_DEPTH));
        assert_eq!(
            too_deep(&json),
            Some(2),
            "the line it went past the bound on"
        );
        // The probe of issue 42: 255 s of parsing before; refused before any parsing now.
        let probe = format!("{{\"source\":{}}}", deep(200_000));
        let err = from_str::<yaml_serde::Value>(&probe)
            .unwrap_err()
            .to_string();
        assert!(err.contains("nested more than 64 deep"), "{err}");
    }

    #[test]
    fn brackets_in_quoted_scalars_and_comments_do_not_count() {
        let open = "[".repeat(MAX_DEPTH + 1);
        for text in [
            format!("{{\"where\": \"{open}\"}}"),
            format!("where: '{open}'"),
            format!("where: 'it''s {open}'"),
            format!("where: \"a \\\" {open}\""),
            format!("# {open}\nsource: 1"),
            format!("a: 1 # {open}"),
            format!("k: [\"{open}\", '{open}']"),
        ] {
            assert_eq!(too_deep(&text), None, "{text}");
            from_str::<yaml_serde::Value>(&text).unwrap();
        }
    }

    #[test]
    fn what_the_scanner_nests_is_never_hidden_behind_a_quote() {
        // Each of these nests N flow collections as the YAML scanner reads them; none may get
        // past the count by a quote it takes for text, or a closing bracket inside a string.
        let n = MAX_DEPTH + 1;
        let cases = [
            // A quote inside a plain scalar of flow context is text, and `[` then nests.
            format!("[a '{}", "[".repeat(n)),
            format!("[a '{}", "[ \"]\" ".repeat(n)),
            // A quote inside a plain scalar of block context, and flow on the next line.
            format!("a: b 'c\nx: {}", "[".repeat(n)),
            // Closing brackets inside quoted strings do not close anything.
            format!("x: {}", "[ \"]\" ".repeat(n)),
            format!("x: {}", "[ ']' ".repeat(n)),
            format!("x: {}", "{\"a\": \"}\", \"b\": ".repeat(n)),
            // An anchor or a tag before a quoted scalar.
            format!("x: {}", "[&a \"]\", ".repeat(n)),
            format!("x: {}", "[!t \"]\", ".repeat(n)),
            // A quoted string over lines in block context.
            format!("x: \"a\n]]]]\"\ny: {}", "[".repeat(n)),
        ];
        for text in cases {
            assert!(
                too_deep(&text).is_some(),
                "not refused: {}",
                &text[..text.len().min(60)]
            );
        }
    }

    #[test]
    fn every_shipped_config_and_job_file_is_within_the_bound() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/config");
        let mut seen = 0;
        let mut dirs = vec![std::path::PathBuf::from(root)];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let path = e.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path
                    .extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
                {
                    let text = std::fs::read_to_string(&path).unwrap();
                    assert_eq!(too_deep(&text), None, "{}", path.display());
                    seen += 1;
                }
            }
        }
        assert!(seen > 3, "{seen} files");
    }

    const SRC: &str = "# comment\nserver:\n  listen: 1.2.3.4:5\n  # x\n  request_timeout: 3s\ncassandra:\n  data_file_directories:\n    - /a\n    - /b\n  listen: no\n";

    #[test]
    fn finds_nested_keys() {
        assert_eq!(line_of(SRC, "server"), Some(2));
        assert_eq!(line_of(SRC, "server.listen"), Some(3));
        assert_eq!(line_of(SRC, "server.request_timeout"), Some(5));
        assert_eq!(line_of(SRC, "cassandra.data_file_directories[1]"), Some(7));
        assert_eq!(line_of(SRC, "cassandra.listen"), Some(10));
        assert_eq!(line_of(SRC, "cassandra.missing"), None);
    }

    /// A thousand scalars under four levels of ten aliases each: ten million nodes from 2 KB
    /// (few enough alias uses that the parser's own repetition limit does not catch it).
    fn laughs() -> String {
        let mut text = format!("a0: &a0 [{}]\n", vec!["x"; 1000].join(", "));
        for level in 1..5 {
            let prev = format!("*a{}", level - 1);
            let items = [prev.as_str(); 10].join(", ");
            text.push_str(&format!("a{level}: &a{level} [{items}]\n"));
        }
        text
    }

    #[test]
    fn alias_expansion_is_bounded_before_values_are_built() {
        let started = std::time::Instant::now();
        let err = from_str::<yaml_serde::Value>(&laughs()).unwrap_err();
        assert!(err.to_string().contains("more than 250000 nodes"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // Ordinary aliases, as operators use them to share a block, still work.
        let ok: yaml_serde::Value = from_str("a: &x {k: 1}\nb: *x\nc: [1, 2]\n").unwrap();
        assert_eq!(ok["b"]["k"], 1);
    }

    /// A document of exactly [`MAX_NODES`] nodes (a sequence and its scalars) is read; one
    /// node more is refused, naming the bound.
    #[test]
    fn a_document_of_max_nodes_is_read_and_one_node_more_refused() {
        let sequence = |scalars: usize| format!("[{}]", vec!["1"; scalars].join(","));
        let at: Vec<u8> = from_str(&sequence(MAX_NODES - 1)).unwrap();
        assert_eq!(at.len(), MAX_NODES - 1);
        let err = from_str::<Vec<u8>>(&sequence(MAX_NODES)).unwrap_err();
        assert!(err.to_string().contains("more than 250000 nodes"), "{err}");
    }

    #[test]
    fn parse_errors_carry_path_and_line() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Inner {
            port: u16,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Outer {
            inner: Inner,
        }
        let err = yaml_serde::from_str::<Outer>("inner:\n  port: 99999\n").unwrap_err();
        let (message, line) = describe_error(&err);
        assert!(message.starts_with("inner.port: "), "{message}");
        assert_eq!(line, Some(2));
    }

    #[test]
    fn json_surrogate_pairs_become_yaml_escapes_and_nothing_else_changes() {
        let json =
            "{\"a\": \"k\\ud83d\\ude00\",\n \"b\": \"\\\\ud83d\", \"c\": \"\\\"\\uD83D\\uDE00\"}";
        let text = json_for_yaml(json);
        assert_eq!(
            text,
            "{\"a\": \"k\\U0001F600\",\n \"b\": \"\\\\ud83d\", \"c\": \"\\\"\\U0001F600\"}"
        );
        let value: yaml_serde::Value = from_str(&text).unwrap();
        assert_eq!(value["a"].as_str(), Some("k😀"));
        // An escaped backslash is not the start of an escape.
        assert_eq!(value["b"].as_str(), Some("\\ud83d"));
        assert_eq!(value["c"].as_str(), Some("\"😀"));
        // Lone surrogates and texts without any pair are left alone.
        for text in [
            "{\"a\": \"\\ud83d\"}",
            "{\"a\": \"\\ude00\\ud83d\"}",
            "{\"a\": \"\\u00e9\"}",
            "{\"a\": 1}",
        ] {
            assert!(
                matches!(json_for_yaml(text), std::borrow::Cow::Borrowed(_)),
                "{text}"
            );
        }
    }
}
