//! YAML helpers shared by every config format drover reads (daemon config now, job files later):
//! error messages that name the key path and the line, the way an operator looks for them.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
