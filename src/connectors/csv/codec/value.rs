//! Composite values from JSON, lenient JSON and cqlsh's forms.

use super::*;

/// JSON, lenient JSON and cqlsh's forms, parsed: numbers and other unquoted words are kept as
/// their text, to be read by the type they meet.
#[derive(Debug)]
pub(super) enum Node {
    Null,
    /// A quoted string.
    Str(String),
    /// An unquoted word: a number, `true`, a cqlsh uuid or blob.
    Bare(String),
    Arr(Vec<Node>),
    Obj(Vec<(Node, Node)>),
}

pub(super) fn node_of_json(v: &Value, depth: usize) -> Result<Node, String> {
    if depth > MAX_DEPTH {
        return Err(format!("a value nested more than {MAX_DEPTH} levels deep"));
    }
    Ok(match v {
        Value::Null => Node::Null,
        Value::Bool(b) => Node::Bare(b.to_string()),
        Value::Number(n) => Node::Bare(n.to_string()),
        Value::String(s) => Node::Str(s.clone()),
        Value::Array(items) => Node::Arr(
            items
                .iter()
                .map(|i| node_of_json(i, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => Node::Obj(
            m.iter()
                .map(|(k, v)| Ok((Node::Str(k.clone()), node_of_json(v, depth + 1)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

pub(super) fn parse_node(text: &str, depth: usize) -> Result<Node, String> {
    let mut p = Parser { s: text, pos: 0 };
    let node = p.value(depth, false)?;
    p.ws();
    if p.pos != text.len() {
        return Err(format!(
            "unexpected text after the value at {}",
            echo(&text[p.pos..])
        ));
    }
    Ok(node)
}

pub(super) struct Parser<'a> {
    s: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        let rest = &self.s[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn peek(&self) -> Option<char> {
        self.s[self.pos..].chars().next()
    }

    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("expected {what} at {}", echo(&self.s[self.pos..])))
    }

    /// One value; in `key` position an unquoted word ends at `: ` (cqlsh's `{1: 'a'}`) or,
    /// after a name, at `:` (`{f1:12}`).
    fn value(&mut self, depth: usize, key: bool) -> Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err(format!("a value nested more than {MAX_DEPTH} levels deep"));
        }
        self.ws();
        match self.peek() {
            None => self.fail("a value"),
            Some('[') => self.seq(']', depth, Vec::new()).map(Node::Arr),
            Some('(') => self.seq(')', depth, Vec::new()).map(Node::Arr),
            Some('{') => self.brace(depth),
            Some('"') => self.json_string().map(Node::Str),
            Some('\'') => self.cql_string().map(Node::Str),
            // An empty element: cqlsh writes a null UDT field as nothing.
            Some(',' | ']' | '}' | ')' | ':') => Ok(Node::Null),
            Some(_) => {
                let rest = &self.s[self.pos..];
                let mut end = rest.find([',', ']', '}', ')']).unwrap_or(rest.len());
                if key {
                    let word = &rest[..end];
                    let named = word.starts_with(|c: char| c.is_alphabetic() || c == '_');
                    if let Some(i) = word
                        .find(": ")
                        .or_else(|| word.find(":\t"))
                        .or_else(|| named.then(|| word.find(':')).flatten())
                    {
                        end = i;
                    }
                }
                let word = rest[..end].trim();
                self.pos += end;
                Ok(match word {
                    "null" | "None" => Node::Null,
                    _ => Node::Bare(word.to_string()),
                })
            }
        }
    }

    /// Items until `close`, after the opening bracket (or after `first`, already read).
    fn seq(
        &mut self,
        close: char,
        depth: usize,
        mut items: Vec<Node>,
    ) -> Result<Vec<Node>, String> {
        if items.is_empty() {
            self.pos += 1;
            self.ws();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok(items);
            }
        } else if !self.sep(close)? {
            return Ok(items);
        }
        loop {
            items.push(self.value(depth + 1, false)?);
            if !self.sep(close)? {
                return Ok(items);
            }
        }
    }

    /// After an item: true at `,` (more to come), false at `close`.
    fn sep(&mut self, close: char) -> Result<bool, String> {
        self.ws();
        match self.peek() {
            Some(',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => self.fail(&format!("`,` or `{close}`")),
        }
    }

    /// `{}`, an object `{"k": v}` / `{k: v}`, or cqlsh's set `{1, 2}`.
    fn brace(&mut self, depth: usize) -> Result<Node, String> {
        self.pos += 1;
        self.ws();
        if self.peek() == Some('}') {
            self.pos += 1;
            return Ok(Node::Obj(Vec::new()));
        }
        let first = self.value(depth + 1, true)?;
        self.ws();
        if self.peek() != Some(':') {
            return self.seq('}', depth, vec![first]).map(Node::Arr);
        }
        let mut entries = Vec::new();
        let mut key = first;
        loop {
            self.ws();
            if self.peek() != Some(':') {
                return self.fail("`:`");
            }
            self.pos += 1;
            let value = self.value(depth + 1, false)?;
            entries.push((key, value));
            if !self.sep('}')? {
                return Ok(Node::Obj(entries));
            }
            key = self.value(depth + 1, true)?;
        }
    }

    fn json_string(&mut self) -> Result<String, String> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        let mut chars = self.s[self.pos..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Ok(out);
                }
                '\\' => match chars.next().map(|(_, c)| c) {
                    Some('n') => out.push('\n'),
                    Some('r') => out.push('\r'),
                    Some('t') => out.push('\t'),
                    Some('b') => out.push('\u{8}'),
                    Some('f') => out.push('\u{c}'),
                    Some('u') => {
                        let first = hex4(&mut chars);
                        let code = match first {
                            Some(hi @ 0xd800..=0xdbff) => {
                                let escaped = chars.next().map(|(_, c)| c) == Some('\\')
                                    && chars.next().map(|(_, c)| c) == Some('u');
                                escaped
                                    .then(|| hex4(&mut chars))
                                    .flatten()
                                    .filter(|lo| (0xdc00..=0xdfff).contains(lo))
                                    .map(|lo| 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00))
                            }
                            other => other,
                        };
                        match code.and_then(char::from_u32) {
                            Some(c) => out.push(c),
                            None => {
                                self.pos = start;
                                return self.fail("a string with valid \\u escapes");
                            }
                        }
                    }
                    // `\"`, `\\`, `\/`, and any other character escaped as itself.
                    Some(c) => out.push(c),
                    None => break,
                },
                c => out.push(c),
            }
        }
        self.pos = start;
        self.fail("a string closed by `\"`")
    }

    /// cqlsh's `'it''s'`.
    fn cql_string(&mut self) -> Result<String, String> {
        let start = self.pos;
        let mut out = String::new();
        let mut rest = &self.s[self.pos + 1..];
        while let Some(i) = rest.find('\'') {
            out.push_str(&rest[..i]);
            if rest[i + 1..].starts_with('\'') {
                out.push('\'');
                rest = &rest[i + 2..];
            } else {
                self.pos = self.s.len() - rest.len() + i + 1;
                return Ok(out);
            }
        }
        self.pos = start;
        self.fail("a string closed by `'`")
    }
}

/// Four hex digits of a `\u` escape.
pub(super) fn hex4(chars: &mut std::str::CharIndices<'_>) -> Option<u32> {
    let h: String = chars.take(4).map(|(_, c)| c).collect();
    if h.len() != 4 {
        return None;
    }
    u32::from_str_radix(&h, 16).ok()
}

/// The serialized bytes of `node` as a `t`; `None` for null.
pub(super) fn encode(
    t: &ColumnType<'_>,
    node: &Node,
    forms: &Forms,
) -> Result<Option<Vec<u8>>, String> {
    let mismatch = |got: &str| format!("expected a {}, got {got}", type_name(t));
    let bytes = match (t, node) {
        (_, Node::Null) => return Ok(None),
        (ColumnType::Native(n), Node::Str(s) | Node::Bare(s)) => native_from_text(n, s, forms)?,
        (ColumnType::Native(_), Node::Arr(_)) => return Err(mismatch("an array")),
        (ColumnType::Native(_), Node::Obj(_)) => return Err(mismatch("an object")),
        // A composite value written as a string of its text: a map's key, a JSON file's cell.
        // Once: a string holding a string is not unwrapped again.
        (_, Node::Str(s)) => {
            return match parse_node(s.trim(), 0)? {
                Node::Str(_) => Err(mismatch(&echo(s))),
                inner => encode(t, &inner, forms),
            };
        }
        (_, Node::Bare(s)) => return Err(mismatch(&echo(s))),
        (ColumnType::Collection { typ, .. }, node) => {
            let empty = Vec::new();
            let items = match node {
                Node::Arr(items) => items,
                Node::Obj(entries) if entries.is_empty() => &empty,
                Node::Obj(entries) => match typ {
                    CollectionType::Map(k, v) => {
                        let mut flat = Vec::with_capacity(entries.len() * 2);
                        for (key, value) in entries {
                            let key = encode(k, key, forms)
                                .map_err(|e| format!("a key of a {}: {e}", type_name(t)))?
                                .ok_or_else(|| format!("a {} with a null key", type_name(t)))?;
                            flat.push(Some(key));
                            flat.push(
                                encode(v, value, forms)
                                    .map_err(|e| format!("a value of a {}: {e}", type_name(t)))?,
                            );
                        }
                        return collection(t, entries.len(), &flat).map(Some);
                    }
                    _ => return Err(mismatch("an object")),
                },
                _ => return Err(mismatch("a value")),
            };
            match typ {
                CollectionType::List(e) | CollectionType::Set(e) => {
                    let encoded = items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| {
                            encode(e, item, forms).map_err(|err| {
                                format!("item {} of a {}: {err}", i + 1, type_name(t))
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    collection(t, encoded.len(), &encoded)?
                }
                CollectionType::Map(..) if items.is_empty() => collection(t, 0, &[])?,
                _ => return Err(mismatch("an array")),
            }
        }
        (ColumnType::Vector { typ, dimensions }, Node::Arr(items)) => {
            if items.len() != usize::from(*dimensions) {
                return Err(format!(
                    "expected a {} of {dimensions} items, got {}",
                    type_name(t),
                    items.len()
                ));
            }
            let mut encoded = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let b = encode(typ, item, forms)
                    .map_err(|e| format!("item {} of a {}: {e}", i + 1, type_name(t)))?;
                encoded.push(b.ok_or_else(|| format!("a {} with a null item", type_name(t)))?);
            }
            let refs: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
            codec::join_vector(typ, &refs)
        }
        (ColumnType::Tuple(types), Node::Arr(items)) => {
            let fields = types.iter().collect::<Vec<_>>();
            positional(t, &fields, items, forms)?
        }
        (ColumnType::UserDefinedType { definition, .. }, Node::Arr(items)) => {
            let fields = definition
                .field_types
                .iter()
                .map(|(_, t)| t)
                .collect::<Vec<_>>();
            positional(t, &fields, items, forms)?
        }
        (ColumnType::UserDefinedType { definition, .. }, Node::Obj(entries)) => {
            let types = &definition.field_types;
            let mut values: Vec<Option<Vec<u8>>> = vec![None; types.len()];
            let mut given = vec![false; types.len()];
            for (key, value) in entries {
                let name = match key {
                    Node::Str(s) | Node::Bare(s) => s,
                    _ => return Err(format!("expected a field name of {}", type_name(t))),
                };
                // Names as Cassandra gives them; any case when that is unambiguous.
                let i = types.iter().position(|(n, _)| n == name).or_else(|| {
                    let mut it = types
                        .iter()
                        .enumerate()
                        .filter(|(_, (n, _))| n.eq_ignore_ascii_case(name));
                    match (it.next(), it.next()) {
                        (Some((i, _)), None) => Some(i),
                        _ => None,
                    }
                });
                let i = i.ok_or_else(|| {
                    format!("the type {} has no field {}", type_name(t), echo(name))
                })?;
                if std::mem::replace(&mut given[i], true) {
                    return Err(format!("the field {} is given twice", echo(name)));
                }
                values[i] = encode(&types[i].1, value, forms).map_err(|e| format!("field {name}: {e}"))?;
            }
            fields_bytes(t, &values)?
        }
        (_, Node::Arr(_)) => return Err(mismatch("an array")),
        (_, Node::Obj(_)) => return Err(mismatch("an object")),
    };
    Ok(Some(bytes))
}

/// A tuple or UDT from its fields in order; missing trailing ones are null.
pub(super) fn positional(
    t: &ColumnType<'_>,
    types: &[&ColumnType<'_>],
    items: &[Node],
    forms: &Forms,
) -> Result<Vec<u8>, String> {
    if items.len() > types.len() {
        return Err(format!(
            "expected a {} of at most {} fields, got {}",
            type_name(t),
            types.len(),
            items.len()
        ));
    }
    let mut values = vec![None; types.len()];
    for (i, (ft, item)) in types.iter().zip(items).enumerate() {
        values[i] =
            encode(ft, item, forms).map_err(|e| format!("field {} of a {}: {e}", i + 1, type_name(t)))?;
    }
    fields_bytes(t, &values)
}

pub(super) fn push_item(
    t: &ColumnType<'_>,
    item: &Option<Vec<u8>>,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    match item {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(b) => {
            let len =
                i32::try_from(b.len()).map_err(|_| format!("a {} item too long", type_name(t)))?;
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(b);
        }
    }
    Ok(())
}

pub(super) fn fields_bytes(
    t: &ColumnType<'_>,
    values: &[Option<Vec<u8>>],
) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for v in values {
        push_item(t, v, &mut out)?;
    }
    Ok(out)
}

/// `count` entries (a map's items are keys and values in turn).
pub(super) fn collection(
    t: &ColumnType<'_>,
    count: usize,
    items: &[Option<Vec<u8>>],
) -> Result<Vec<u8>, String> {
    let n = i32::try_from(count).map_err(|_| format!("a {} with too many items", type_name(t)))?;
    let mut out = n.to_be_bytes().to_vec();
    for item in items {
        push_item(t, item, &mut out)?;
    }
    Ok(out)
}
