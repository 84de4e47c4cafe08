//! The CQL wire format of values: the one place where drover reads serialized cells (items of
//! collections, tuple and UDT fields, vector elements, integers, decimals, durations) and
//! builds new ones. The copy (`copy.rs`) and the validator's comparator (`compare/`) both read
//! values through it.

use bytes::Bytes;
use num_bigint::BigInt;
use scylla::cluster::metadata::{ColumnType, NativeType};

/// Reads a `[len: i32][bytes]` item at `pos`; `None` inside for a null item (negative length).
pub fn item<'a>(b: &'a [u8], pos: &mut usize) -> Option<Option<&'a [u8]>> {
    let len = i32::from_be_bytes(b.get(*pos..*pos + 4)?.try_into().ok()?);
    *pos += 4;
    if len < 0 {
        return Some(None);
    }
    let v = b.get(*pos..*pos + len as usize)?;
    *pos += len as usize;
    Some(Some(v))
}

/// The count at the head of a collection (`[n: i32]`), and where its items start.
fn collection_count(b: &[u8]) -> Option<(usize, usize)> {
    let n = i32::from_be_bytes(b.get(..4)?.try_into().ok()?);
    Some((n.max(0) as usize, 4))
}

/// The items of a collection (`[n: i32]` then items; a map has two items per entry).
pub fn collection_items(b: &[u8], per_entry: usize) -> Option<Vec<Option<&[u8]>>> {
    let (n, mut pos) = collection_count(b)?;
    let count = n * per_entry;
    // The count comes from the bytes: each item takes at least 4 of them.
    let mut out = Vec::with_capacity(count.min(b.len() / 4));
    for _ in 0..count {
        out.push(item(b, &mut pos)?);
    }
    (pos == b.len()).then_some(out)
}

/// Splits a serialized collection (`list`/`set`: `[n][len][item]...`, `map`:
/// `[n]([len][k][len][v])...`) into its serialized elements, length prefixes included (for a
/// map, each element is a key and value pair), so they can be joined back in groups.
pub fn split_collection(bytes: &Bytes, is_map: bool) -> Option<Vec<Bytes>> {
    let (n, mut pos) = collection_count(bytes)?;
    let per_entry = if is_map { 2 } else { 1 };
    let mut out = Vec::with_capacity(n.min(bytes.len() / 4));
    for _ in 0..n {
        let start = pos;
        for _ in 0..per_entry {
            item(bytes, &mut pos)?;
        }
        out.push(bytes.slice(start..pos));
    }
    Some(out)
}

/// Joins serialized elements (as [`split_collection`] gives them) back into a collection.
pub fn join_collection(elements: &[Bytes]) -> Bytes {
    let mut out = Vec::with_capacity(4 + elements.iter().map(Bytes::len).sum::<usize>());
    out.extend_from_slice(&(elements.len() as i32).to_be_bytes());
    for e in elements {
        out.extend_from_slice(e);
    }
    Bytes::from(out)
}

/// The fields of a tuple or UDT: items until the bytes end, trailing nulls left out (a value
/// may have fewer fields than its type, the missing ones being null, as Cassandra reads them).
pub fn fields(b: &[u8]) -> Option<Vec<Option<&[u8]>>> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < b.len() {
        out.push(item(b, &mut pos)?);
    }
    while out.last() == Some(&None) {
        out.pop();
    }
    Some(out)
}

/// Byte length of a vector element whose type has a fixed size, as Cassandra serializes
/// vectors (fixed-size elements without length prefixes). `date`, `time`, `smallint` and
/// `tinyint` are not among them: Cassandra gives them no fixed length, so their elements carry
/// one (the DataStax Python driver and the Rust driver read them so too).
fn fixed_size(t: &ColumnType<'_>) -> Option<usize> {
    match t {
        ColumnType::Native(n) => match n {
            NativeType::Boolean => Some(1),
            NativeType::Int | NativeType::Float => Some(4),
            NativeType::BigInt
            | NativeType::Double
            | NativeType::Timestamp
            | NativeType::Counter => Some(8),
            NativeType::Uuid | NativeType::Timeuuid => Some(16),
            _ => None,
        },
        _ => None,
    }
}

/// The elements of a vector: fixed-size elements back to back, or, for elements of variable
/// size (`vector<text, 2>`), each after its length as an unsigned vint, as Cassandra
/// serializes them.
pub fn vector_items<'a>(b: &'a [u8], t: &ColumnType<'_>, dims: u16) -> Option<Vec<&'a [u8]>> {
    if let Some(size) = fixed_size(t) {
        return (size > 0 && b.len() == size * dims as usize).then(|| b.chunks(size).collect());
    }
    let mut out = Vec::with_capacity(usize::from(dims));
    let mut rest = b;
    for _ in 0..dims {
        let (len, used) = read_unsigned_vint(rest)?;
        let len = usize::try_from(len).ok()?;
        let item = rest.get(used..used.checked_add(len)?)?;
        out.push(item);
        rest = &rest[used + len..];
    }
    rest.is_empty().then_some(out)
}

/// Joins vector elements as [`vector_items`] reads them: a length before each element of a
/// variable-size type, none before fixed-size ones.
pub fn join_vector(t: &ColumnType<'_>, items: &[&[u8]]) -> Vec<u8> {
    let fixed = fixed_size(t).is_some();
    let mut out = Vec::new();
    for item in items {
        if !fixed {
            write_unsigned_vint(item.len() as u64, &mut out);
        }
        out.extend_from_slice(item);
    }
    out
}

/// Cassandra's unsigned vint: the count of leading one bits of the first byte is the count of
/// bytes that follow; the value is the first byte's other bits, then those bytes, big-endian.
/// Returns the value and the bytes it took.
pub fn read_unsigned_vint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let extra = first.leading_ones() as usize;
    let mut value = if extra >= 8 {
        0
    } else {
        u64::from(first & (0xff >> extra))
    };
    for byte in b.get(1..1 + extra)? {
        value = (value << 8) | u64::from(*byte);
    }
    Some((value, 1 + extra))
}

/// Writes `v` as Cassandra's unsigned vint (see [`read_unsigned_vint`]), in the fewest bytes.
pub fn write_unsigned_vint(v: u64, out: &mut Vec<u8>) {
    // Bytes after the first: one per 7 bits beyond the first 7, at most 8.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    let extra = ((bits - 1) / 7).min(8);
    if extra == 0 {
        out.push(v as u8);
        return;
    }
    let bytes = v.to_be_bytes();
    let mut value = bytes[8 - extra..].to_vec();
    let first = if extra == 8 {
        0xff
    } else {
        // The value's bits above the extra bytes, under the run of ones.
        (!(0xffu8 >> extra)) | ((v >> (8 * extra)) as u8)
    };
    out.push(first);
    out.append(&mut value);
}

/// A big-endian integer of any CQL integer width (bigint, int, smallint, tinyint).
pub fn integer(b: &[u8]) -> Option<i64> {
    Some(match b.len() {
        8 => i64::from_be_bytes(b.try_into().ok()?),
        4 => i64::from(i32::from_be_bytes(b.try_into().ok()?)),
        2 => i64::from(i16::from_be_bytes(b.try_into().ok()?)),
        1 => i64::from(b[0] as i8),
        _ => return None,
    })
}

/// Reads a big-endian bigint cell.
pub fn read_i64(cell: &Option<Bytes>) -> Option<i64> {
    let b = cell.as_ref()?;
    Some(i64::from_be_bytes(b.as_ref().try_into().ok()?))
}

/// Reads a big-endian int cell.
pub fn read_i32(cell: &Option<Bytes>) -> Option<i32> {
    let b = cell.as_ref()?;
    Some(i32::from_be_bytes(b.as_ref().try_into().ok()?))
}

/// Reads a `list<bigint>` or `list<int>` cell (what Cassandra 5.0 returns for the WRITETIME or
/// TTL of a non-frozen collection or UDT: one entry per element, nulls for no TTL).
pub fn read_int_list(cell: &Option<Bytes>) -> Option<Vec<Option<i64>>> {
    collection_items(cell.as_ref()?, 1)?
        .into_iter()
        .map(|it| match it {
            None => Some(None),
            Some(v) if matches!(v.len(), 4 | 8) => integer(v).map(Some),
            Some(_) => None,
        })
        .collect()
}

/// A `float` or `double` value.
pub fn float(t: &NativeType, b: &[u8]) -> Option<f64> {
    match (t, b.len()) {
        (NativeType::Float, 4) => Some(f64::from(f32::from_be_bytes(b.try_into().ok()?))),
        (NativeType::Double, 8) => Some(f64::from_be_bytes(b.try_into().ok()?)),
        _ => None,
    }
}

/// A `decimal` (`[scale: i32][unscaled: varint]`) as its scale and unscaled value.
pub fn decimal(b: &[u8]) -> Option<(i32, BigInt)> {
    let scale = i32::from_be_bytes(b.get(..4)?.try_into().ok()?);
    Some((scale, BigInt::from_signed_bytes_be(&b[4..])))
}

/// Parses `-12.340`, `1E+3`, `5e-2` into (scale, unscaled).
pub fn parse_decimal(t: &str) -> Option<(i32, BigInt)> {
    let t = t.trim();
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i32>().ok()?),
        None => (t, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let digits = format!("{int}{frac}");
    let unscaled: BigInt = digits.parse().ok()?;
    let scale = i32::try_from(frac.len()).ok()?.checked_sub(exp)?;
    Some((scale, unscaled))
}

/// Serializes a `decimal`.
pub fn encode_decimal(scale: i32, unscaled: &BigInt) -> Bytes {
    let mut out = scale.to_be_bytes().to_vec();
    out.extend_from_slice(&unscaled.to_signed_bytes_be());
    Bytes::from(out)
}

/// Rewrites a serialized `decimal` without trailing zeros (`1.500` → `1.5`, `100` stays
/// `100`), as ScyllaDB Migrator's `stripTrailingZerosForDecimals`.
pub fn strip_trailing_zeros(bytes: &Bytes) -> Bytes {
    if bytes.len() < 5 {
        return bytes.clone();
    }
    let Some((mut scale, mut unscaled)) = decimal(bytes) else {
        return bytes.clone();
    };
    let ten = BigInt::from(10);
    let zero = BigInt::from(0);
    if unscaled == zero {
        return encode_decimal(0, &zero);
    }
    while scale > 0 && (&unscaled % &ten) == zero {
        unscaled /= &ten;
        scale -= 1;
    }
    encode_decimal(scale, &unscaled)
}

/// Reads an unsigned vint (Cassandra's variable-length integer).
fn read_vint(v: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *v.get(*pos)?;
    let extra = first.leading_ones() as usize;
    let mut value = if extra >= 8 {
        0
    } else {
        u64::from(first & (0xff >> extra))
    };
    for i in 0..extra {
        value = (value << 8) | u64::from(*v.get(*pos + 1 + i)?);
    }
    *pos += 1 + extra;
    Some(value)
}

fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A `duration`: months, days and nanoseconds (three zigzag vints).
pub fn duration(v: &[u8]) -> Option<[i64; 3]> {
    let mut pos = 0;
    let mut out = [0; 3];
    for part in &mut out {
        *part = zigzag(read_vint(v, &mut pos)?);
    }
    Some(out)
}

fn write_zigzag_vint(v: i64, out: &mut Vec<u8>) {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    // Cassandra's unsigned vint: the number of extra bytes as leading ones of the first byte.
    let bits = 64 - u.leading_zeros() as usize;
    // Bytes after the first: n of them hold 7 * (n + 1) bits; 8 of them hold all 64.
    let mut extra = 0usize;
    while extra < 8 && bits > 7 * (extra + 1) {
        extra += 1;
    }
    if extra == 8 {
        out.push(0xff);
        out.extend_from_slice(&u.to_be_bytes());
        return;
    }
    let mut bytes = vec![0u8; extra + 1];
    for i in (0..=extra).rev() {
        bytes[i] = (u & 0xff) as u8;
        u >>= 8;
    }
    bytes[0] |= !(0xffu8 >> extra);
    out.extend_from_slice(&bytes);
}

/// Serializes a CQL `duration`.
pub fn encode_duration(months: i64, days: i64, nanos: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(12);
    for v in [months, days, nanos] {
        write_zigzag_vint(v, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_of_every_width_read_with_their_sign() {
        assert_eq!(integer(&[0xff]), Some(-1), "tinyint");
        assert_eq!(integer(&[0x7f]), Some(127));
        assert_eq!(integer(&[0x80, 0x00]), Some(-32768), "smallint");
        assert_eq!(integer(&(-5i32).to_be_bytes()), Some(-5), "int");
        assert_eq!(integer(&i64::MIN.to_be_bytes()), Some(i64::MIN), "bigint");
        assert_eq!(integer(&[0, 0, 0]), None, "no CQL integer is three bytes");
    }

    #[test]
    fn durations_are_written_as_cassandra_writes_them_at_every_width() {
        // Cassandra's zigzag vints: 64 is 128 unsigned, one bit past the first byte's seven,
        // so two bytes (0x80 0x80); -65 is 129 (0x80 0x81); 0 is one byte.
        assert_eq!(
            encode_duration(64, -65, 0),
            vec![0x80, 0x80, 0x80, 0x81, 0x00]
        );
        assert_eq!(encode_duration(63, -64, 1), vec![0x7e, 0x7f, 0x02]);
        // Every power of two and its neighbours, signed, read back as written.
        for k in 0..63 {
            for v in [1i64 << k, (1i64 << k) - 1, -(1i64 << k), -(1i64 << k) - 1] {
                let bytes = encode_duration(v, -v, v / 3);
                assert_eq!(duration(&bytes), Some([v, -v, v / 3]), "{v}");
            }
        }
        for v in [i64::MAX, i64::MIN] {
            let bytes = encode_duration(v, 0, v);
            assert_eq!(bytes.len(), 9 + 1 + 9, "the widest vint is nine bytes");
            assert_eq!(duration(&bytes), Some([v, 0, v]));
        }
    }

    #[test]
    fn unsigned_vints_round_trip_in_the_fewest_bytes() {
        let enc = |v: u64| {
            let mut out = Vec::new();
            write_unsigned_vint(v, &mut out);
            out
        };
        assert_eq!(enc(0), vec![0]);
        assert_eq!(enc(127), vec![127]);
        assert_eq!(enc(128), vec![0x80, 0x80]);
        assert_eq!(enc(200), vec![0x80, 0xc8]);
        assert_eq!(enc(16_383), vec![0xbf, 0xff]);
        assert_eq!(enc(16_384), vec![0xc0, 0x40, 0x00]);
        assert_eq!(enc(u64::MAX), [vec![0xff], vec![0xff; 8]].concat());
        for shift in 0..64 {
            for v in [1u64 << shift, (1u64 << shift) - 1, (1u64 << shift) + 1] {
                let e = enc(v);
                assert_eq!(read_unsigned_vint(&e), Some((v, e.len())), "{v}");
            }
        }
        // Cut short: refused, not read past the end.
        assert_eq!(read_unsigned_vint(&[0xc0, 0x40]), None);
        assert_eq!(read_unsigned_vint(&[]), None);
    }

    #[test]
    fn vectors_of_variable_size_elements_carry_their_lengths() {
        let text = ColumnType::Native(NativeType::Text);
        let long = vec![b'x'; 300];
        let items: Vec<&[u8]> = vec![b"", b"ab", &long];
        let joined = join_vector(&text, &items);
        assert_eq!(&joined[..4], &[0, 2, b'a', b'b']);
        assert_eq!(vector_items(&joined, &text, 3), Some(items.clone()));
        // One element short, or one byte too many: not a vector of 3.
        assert_eq!(vector_items(&joined[..joined.len() - 1], &text, 3), None);
        assert_eq!(
            vector_items(&[joined.clone(), vec![0]].concat(), &text, 3),
            None
        );
        let int = ColumnType::Native(NativeType::Int);
        let fixed = join_vector(&int, &[&[0, 0, 0, 1], &[0, 0, 0, 2]]);
        assert_eq!(fixed, vec![0, 0, 0, 1, 0, 0, 0, 2]);
        assert_eq!(vector_items(&fixed, &int, 2).map(|v| v.len()), Some(2));
        assert_eq!(vector_items(&fixed, &int, 3), None);
    }

    fn list(items: &[&[u8]]) -> Bytes {
        let mut v = (items.len() as i32).to_be_bytes().to_vec();
        for i in items {
            v.extend_from_slice(&(i.len() as i32).to_be_bytes());
            v.extend_from_slice(i);
        }
        Bytes::from(v)
    }

    #[test]
    fn collections_split_and_join_back() {
        let l = list(&[b"a", b"", b"ccc"]);
        let parts = split_collection(&l, false).unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(join_collection(&parts), l);
        let m = list(&[b"k1", b"v1", b"k2", b"v2"]);
        let mut fixed = m.to_vec();
        fixed[..4].copy_from_slice(&2i32.to_be_bytes());
        let m = Bytes::from(fixed);
        let parts = split_collection(&m, true).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(join_collection(&parts), m);
        assert!(split_collection(&Bytes::from_static(&[0, 0, 0, 2, 0, 0, 0, 9]), false).is_none());
    }

    #[test]
    fn int_lists_read_with_nulls() {
        let mut v = 3i32.to_be_bytes().to_vec();
        v.extend_from_slice(&8i32.to_be_bytes());
        v.extend_from_slice(&77i64.to_be_bytes());
        v.extend_from_slice(&(-1i32).to_be_bytes());
        v.extend_from_slice(&4i32.to_be_bytes());
        v.extend_from_slice(&5i32.to_be_bytes());
        assert_eq!(
            read_int_list(&Some(Bytes::from(v))),
            Some(vec![Some(77), None, Some(5)])
        );
    }

    #[test]
    fn decimals_lose_trailing_zeros_only() {
        let dec = |scale: i32, unscaled: i64| encode_decimal(scale, &BigInt::from(unscaled));
        assert_eq!(strip_trailing_zeros(&dec(3, 1500)), dec(1, 15));
        assert_eq!(strip_trailing_zeros(&dec(0, 100)), dec(0, 100));
        assert_eq!(strip_trailing_zeros(&dec(2, -1200)), dec(0, -12));
        assert_eq!(strip_trailing_zeros(&dec(5, 0)), dec(0, 0));
        assert_eq!(strip_trailing_zeros(&dec(-2, 10)), dec(-2, 10));
    }
}
