//! The objects of a JSON file that is one array (DSBulk's `SINGLE_DOCUMENT`), cut out of its
//! bytes as they arrive, so that a file of any size is read with the memory of one object.
//!
//! Only the array's own syntax is checked here — the `[`, the `,` between items, the `]` and
//! nothing but whitespace after it — and each object's extent found by counting brackets
//! outside strings; the object's text itself is parsed (and checked) by the caller.

/// Where the scanner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the `[`.
    BeforeArray,
    /// Just after the `[`: an object or `]`.
    FirstItem,
    /// After a `,`: an object.
    Item,
    /// Inside an object.
    InObject,
    /// After an object: `,` or `]`.
    AfterItem,
    /// After the `]`: whitespace only.
    Done,
}

/// A push scanner of one JSON array of objects: bytes in, each object's text and the line it
/// starts on out. After an error it is not to be used again.
#[derive(Debug)]
pub struct ArrayObjects {
    state: State,
    /// The line of the next byte.
    line: u64,
    /// The object being read, from its `{`.
    object: Vec<u8>,
    object_line: u64,
    /// Brackets (`{`, `[`) open in the object.
    depth: u32,
    in_string: bool,
    /// The last byte in a string was an unescaped `\`.
    escaped: bool,
    /// The longest object, in bytes.
    max: usize,
}

/// A byte for a message: the character when it is ASCII.
fn shown(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("`{}`", char::from(b))
    } else {
        format!("byte 0x{b:02x}")
    }
}

impl ArrayObjects {
    /// A scanner of objects of at most `max` bytes, whose first byte is on `line`.
    pub fn new(max: usize, line: u64) -> Self {
        Self {
            state: State::BeforeArray,
            line,
            object: Vec::new(),
            object_line: line,
            depth: 0,
            in_string: false,
            escaped: false,
            max,
        }
    }

    /// Scans `chunk`, appending each object completed in it (its line, its text) to `out`;
    /// on an error, the objects completed before it.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<(u64, Vec<u8>)>) -> Result<(), String> {
        let mut i = 0;
        while i < chunk.len() {
            if self.state == State::InObject {
                let start = i;
                let mut complete = false;
                while i < chunk.len() {
                    let b = chunk[i];
                    i += 1;
                    if b == b'\n' {
                        self.line += 1;
                    }
                    if self.in_string {
                        if self.escaped {
                            self.escaped = false;
                        } else if b == b'\\' {
                            self.escaped = true;
                        } else if b == b'"' {
                            self.in_string = false;
                        }
                        continue;
                    }
                    match b {
                        b'"' => self.in_string = true,
                        b'{' | b'[' => self.depth += 1,
                        b'}' | b']' => {
                            self.depth -= 1;
                            if self.depth == 0 {
                                complete = true;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                // Checked before the bytes are kept, so that memory stays within the bound.
                if self.object.len() + (i - start) > self.max {
                    return Err(format!(
                        "line {}: an object longer than {} bytes",
                        self.object_line, self.max
                    ));
                }
                self.object.extend_from_slice(&chunk[start..i]);
                if complete {
                    out.push((self.object_line, std::mem::take(&mut self.object)));
                    self.state = State::AfterItem;
                }
                continue;
            }
            let b = chunk[i];
            i += 1;
            if b == b'\n' {
                self.line += 1;
                continue;
            }
            if matches!(b, b' ' | b'\t' | b'\r') {
                continue;
            }
            let line = self.line;
            self.state = match (self.state, b) {
                (State::BeforeArray, b'[') => State::FirstItem,
                (State::BeforeArray, _) => {
                    return Err(format!(
                        "line {line}: expected `[`, the start of one JSON array of objects (SINGLE_DOCUMENT), got {}",
                        shown(b)
                    ));
                }
                (State::FirstItem, b']') | (State::AfterItem, b']') => State::Done,
                (State::FirstItem | State::Item, b'{') => {
                    self.object_line = line;
                    self.object.push(b'{');
                    self.depth = 1;
                    State::InObject
                }
                (State::FirstItem | State::Item, _) => {
                    return Err(format!(
                        "line {line}: expected a JSON object as an item of the array, got {}",
                        shown(b)
                    ));
                }
                (State::AfterItem, b',') => State::Item,
                (State::AfterItem, _) => {
                    return Err(format!(
                        "line {line}: expected `,` or `]` after an object of the array, got {}",
                        shown(b)
                    ));
                }
                (State::Done, _) => {
                    return Err(format!(
                        "line {line}: text after the array's closing `]`, got {}",
                        shown(b)
                    ));
                }
                (State::InObject, _) => unreachable!("objects are read above"),
            };
        }
        Ok(())
    }

    /// The end of the file: an error unless the array was closed.
    pub fn finish(&self) -> Result<(), String> {
        match self.state {
            State::Done => Ok(()),
            State::BeforeArray => Err(format!(
                "line {}: expected `[`, the start of one JSON array of objects (SINGLE_DOCUMENT), got the end of the file",
                self.line
            )),
            State::InObject => Err(format!(
                "line {}: the object that begins on this line is never closed",
                self.object_line
            )),
            _ => Err(format!(
                "line {}: the file ends before the array's closing `]`",
                self.line
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The objects of `chunks` as text with their lines, or the error.
    fn scan(chunks: &[&[u8]], max: usize) -> Result<Vec<(u64, String)>, String> {
        let mut s = ArrayObjects::new(max, 1);
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, &mut out)?;
        }
        s.finish()?;
        Ok(out
            .into_iter()
            .map(|(l, t)| (l, String::from_utf8(t).unwrap()))
            .collect())
    }

    #[test]
    fn objects_come_out_with_their_lines_at_every_split() {
        let input = b" \n[\n{\"a\":\"}],{[\\\"\"},\n  {\"b\":[1,{\"c\":2}]} ,{\n}\n]\n\n";
        let want = vec![
            (3, "{\"a\":\"}],{[\\\"\"}".to_string()),
            (4, "{\"b\":[1,{\"c\":2}]}".to_string()),
            (4, "{\n}".to_string()),
        ];
        for at in 0..=input.len() {
            assert_eq!(
                scan(&[&input[..at], &input[at..]], 1000).unwrap(),
                want,
                "split at {at}"
            );
        }
        let ones: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(scan(&ones, 1000).unwrap(), want);
    }

    #[test]
    fn an_empty_array_has_no_objects() {
        assert!(scan(&[b"[]"], 10).unwrap().is_empty());
        assert!(scan(&[b"\r\n [ \n ] \n"], 10).unwrap().is_empty());
    }

    #[test]
    fn an_object_of_the_longest_length_is_read_and_one_byte_longer_refused() {
        // `{"k":"xx"}` is 10 bytes.
        let ten = b"[{\"k\":\"xx\"},{\"k\":\"y\"}]";
        assert_eq!(scan(&[ten], 10).unwrap().len(), 2);
        let eleven = b"[{\"k\":\"y\"},\n{\"k\":\"xxx\"}]";
        assert_eq!(
            scan(&[eleven], 10).unwrap_err(),
            "line 2: an object longer than 10 bytes"
        );
        let ones: Vec<&[u8]> = eleven.chunks(1).collect();
        assert!(scan(&ones, 10).is_err());
        let ones: Vec<&[u8]> = ten.chunks(1).collect();
        assert!(scan(&ones, 10).is_ok());
    }

    #[test]
    fn a_broken_array_names_its_line() {
        let e = |input: &[u8]| scan(&[input], 100).unwrap_err();
        assert_eq!(
            e(b"\n{\"k\":1}"),
            "line 2: expected `[`, the start of one JSON array of objects (SINGLE_DOCUMENT), got `{`"
        );
        assert_eq!(
            e(b"[{},\n2]"),
            "line 2: expected a JSON object as an item of the array, got `2`"
        );
        assert_eq!(
            e(b"[{},]"),
            "line 1: expected a JSON object as an item of the array, got `]`"
        );
        assert_eq!(
            e(b"[{}\n{}]"),
            "line 2: expected `,` or `]` after an object of the array, got `{`"
        );
        assert_eq!(
            e(b"[{}]\n\n[]"),
            "line 3: text after the array's closing `]`, got `[`"
        );
        assert_eq!(
            e(b"[{}, {\"a\":\n\"}\"\n"),
            "line 1: the object that begins on this line is never closed"
        );
        assert_eq!(
            e(b"[{},\n{}\n"),
            "line 3: the file ends before the array's closing `]`"
        );
        assert_eq!(
            e(b"  "),
            "line 1: expected `[`, the start of one JSON array of objects (SINGLE_DOCUMENT), got the end of the file"
        );
    }
}
