//! Writes of multi-cell columns that stay exact when a unit is copied twice (a retry, a resume,
//! a re-run).
//!
//! Sets, maps and UDT fields are cells addressed by their key or field, so writing them again
//! with the same writetime changes nothing. A non-frozen list is different: each element
//! written gets a new cell address (a time-based UUID chosen by the coordinator), and the
//! tombstone an `INSERT` writes for the old value is one microsecond older than the elements,
//! so it cannot remove elements written before at the same writetime. Copied twice, a list
//! would hold every element twice. So before a list is written, the target's elements and
//! their writetimes are read, and only the source elements not already there (same bytes,
//! same writetime) are written.

use bytes::Bytes;
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;

use super::codec::{join_collection, read_int_list, split_collection};
use super::rows::{Bound, BoundRow, RawRow};

/// The read of a row's (or a partition's static) lists on the target, before writing them.
/// Cells come back as `l, WRITETIME(l)` pairs.
#[derive(Clone)]
pub struct ListRead {
    /// `SELECT l, WRITETIME(l), … FROM target WHERE <key>`.
    pub statement: PreparedStatement,
    /// Index of each list column among the read's lists, by its index among the written
    /// columns (regular or static).
    pub position: std::collections::BTreeMap<usize, usize>,
}

/// One list value of a write, checked against the target before it is sent.
#[derive(Debug, Clone)]
pub struct ListCheck {
    /// Index of the list's value among the write's values.
    pub slot: usize,
    /// Index of the list among the guard read's lists.
    pub column: usize,
    /// The source's elements, serialized, with the writetime they are written at.
    pub elements: Vec<(Bytes, i64)>,
    /// The write carries nothing else (an append): it is left out when every element is
    /// already there. Otherwise the value is left unset.
    pub alone: bool,
}

/// The lists of one write, and how to read their current state on the target.
#[derive(Clone)]
pub struct ListGuard {
    /// The read.
    pub read: PreparedStatement,
    /// Its key values.
    pub key: BoundRow,
    /// The lists the write sets.
    pub checks: Vec<ListCheck>,
    /// The write is left out when the read finds the row (a row with no cell, whose marker's
    /// writetime cannot be read: the first copy's stays).
    pub drop_if_present: bool,
}

impl ListGuard {
    /// `values` with every list reduced to the elements the target lacks; `None` when the
    /// write has nothing left to do.
    pub async fn apply(
        &self,
        session: &Session,
        values: &BoundRow,
    ) -> Result<Option<BoundRow>, scylla::errors::ExecutionError> {
        let current = session.execute_unpaged(&self.read, &self.key).await?;
        let row: Option<RawRow> = current
            .into_rows_result()
            .ok()
            .and_then(|r| r.maybe_first_row::<RawRow>().ok().flatten());
        Ok(self.reduce(row.as_ref(), values))
    }

    /// The pure part of [`apply`](Self::apply): `present` is the read's row, if any.
    pub fn reduce(&self, present: Option<&RawRow>, values: &BoundRow) -> Option<BoundRow> {
        reduce(&self.checks, self.drop_if_present, present, values)
    }
}

/// [`ListGuard::reduce`], on the guard's checks alone (a guard holds a prepared statement,
/// which only a session makes).
fn reduce(
    checks: &[ListCheck],
    drop_if_present: bool,
    present: Option<&RawRow>,
    values: &BoundRow,
) -> Option<BoundRow> {
    if drop_if_present && present.is_some() {
        return None;
    }
    let mut out = values.clone();
    for check in checks {
        let there = present
            .map(|r| target_elements(r, check.column))
            .unwrap_or_default();
        let missing = missing_elements(&check.elements, there);
        if missing.is_empty() {
            if check.alone {
                return None;
            }
            out.0[check.slot] = Bound::Unset;
        } else if missing.len() < check.elements.len() {
            out.0[check.slot] = Bound::Value(join_collection(&missing));
        }
    }
    Some(out)
}

/// The elements of the list at `column` of a guard read, with their writetimes.
fn target_elements(row: &RawRow, column: usize) -> Vec<(Bytes, i64)> {
    let (Some(value), wts) = (
        row.cells.get(2 * column).cloned().flatten(),
        row.cells.get(2 * column + 1).cloned().flatten(),
    ) else {
        return Vec::new();
    };
    let elements = split_collection(&value, false).unwrap_or_default();
    let wts = read_int_list(&wts).unwrap_or_default();
    elements
        .into_iter()
        .zip(wts)
        .map(|(e, wt)| (e, wt.unwrap_or(i64::MIN)))
        .collect()
}

/// The source elements not among `there`, as a multiset: a list may hold one value twice
/// with the same writetime, and then the target must hold it twice too.
fn missing_elements(source: &[(Bytes, i64)], mut there: Vec<(Bytes, i64)>) -> Vec<Bytes> {
    let mut out = Vec::new();
    for (e, wt) in source {
        match there.iter().position(|(te, twt)| te == e && twt == wt) {
            Some(i) => {
                there.swap_remove(i);
            }
            None => out.push(e.clone()),
        }
    }
    out
}

/// The fields of a non-frozen UDT value, paired with the writetime and TTL of each of its
/// cells; `None` when they do not line up.
///
/// Cassandra 5.0 answers `WRITETIME(u)` and `TTL(u)` with one entry per field of the type, in
/// field order, null for a field that holds nothing (`[1000, null, 2000]` for `street`, a null
/// `num`, `zip`). A list with one entry per non-null field is taken too (the same thing when
/// no field is null). Null fields are left out: they have no cell to write.
pub fn udt_fields(
    value: &Bytes,
    wts: &[Option<i64>],
    ttls: &[Option<i64>],
) -> Option<Vec<(usize, Bytes, i64, i32)>> {
    let mut fields = Vec::new();
    let mut pos = 0;
    let mut index = 0;
    while pos < value.len() {
        let len = i32::from_be_bytes(value.get(pos..pos + 4)?.try_into().ok()?);
        pos += 4;
        if len >= 0 {
            let end = pos.checked_add(len as usize)?;
            fields.push((index, value.get(pos..end).map(|_| value.slice(pos..end))?));
            pos = end;
        }
        index += 1;
    }
    // Entries for the non-null fields only, or for every field of the value.
    let per_value_field = wts.len() != fields.len();
    if per_value_field && wts.len() < index {
        return None;
    }
    fields
        .into_iter()
        .enumerate()
        .map(|(n, (field, bytes))| {
            let e = if per_value_field { field } else { n };
            let wt = (*wts.get(e)?)?;
            let ttl = ttls.get(e).copied().flatten().unwrap_or(0);
            Some((field, bytes, wt, i32::try_from(ttl).unwrap_or(0)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn el(v: u8) -> Bytes {
        Bytes::from(vec![0, 0, 0, 1, v])
    }

    #[test]
    fn only_elements_the_target_lacks_are_written() {
        let source = vec![(el(1), 10), (el(2), 10), (el(1), 10), (el(3), 20)];
        // Nothing there: everything.
        assert_eq!(missing_elements(&source, vec![]).len(), 4);
        // A first copy there: nothing.
        assert!(missing_elements(&source, source.clone()).is_empty());
        // One of the two equal elements there: the other one still goes.
        assert_eq!(
            missing_elements(&source, vec![(el(1), 10), (el(3), 20)]),
            vec![el(2), el(1)]
        );
        // The same value at another writetime is another element.
        assert_eq!(
            missing_elements(&[(el(1), 10)], vec![(el(1), 11)]),
            vec![el(1)]
        );
    }

    /// A guard read's row: `(list, WRITETIME(list))` per list column.
    fn read_row(lists: &[Option<(&[Bytes], &[i64])>]) -> RawRow {
        let mut cells = Vec::new();
        for l in lists {
            match l {
                Some((elements, wts)) => {
                    cells.push(Some(join_collection(elements)));
                    // Elements as the protocol sends them: each after its length.
                    let wts: Vec<Bytes> = wts
                        .iter()
                        .map(|w| Bytes::from([&8i32.to_be_bytes()[..], &w.to_be_bytes()].concat()))
                        .collect();
                    cells.push(Some(join_collection(&wts)));
                }
                None => cells.extend([None, None]),
            }
        }
        RawRow { cells }
    }

    fn check(slot: usize, column: usize, elements: &[(Bytes, i64)], alone: bool) -> ListCheck {
        ListCheck {
            slot,
            column,
            elements: elements.to_vec(),
            alone,
        }
    }

    fn value_at(row: &BoundRow, slot: usize) -> Option<Bytes> {
        match &row.0[slot] {
            Bound::Value(v) => Some(v.clone()),
            _ => None,
        }
    }

    #[test]
    fn a_guard_writes_only_the_elements_the_target_lacks() {
        let values = BoundRow(vec![
            Bound::Int(7),
            Bound::Value(join_collection(&[el(1), el(2)])),
            Bound::Value(join_collection(&[el(3)])),
        ]);
        let checks = [
            check(1, 0, &[(el(1), 10), (el(2), 10)], false),
            check(2, 1, &[(el(3), 20)], false),
        ];
        // Nothing on the target: every value as it was.
        let out = reduce(&checks, false, None, &values).unwrap();
        assert_eq!(value_at(&out, 1), value_at(&values, 1));
        assert_eq!(value_at(&out, 2), value_at(&values, 2));
        // The first list half there: only its missing element; the second whole there: unset.
        let row = read_row(&[Some((&[el(1)], &[10])), Some((&[el(3)], &[20]))]);
        let out = reduce(&checks, false, Some(&row), &values).unwrap();
        assert_eq!(value_at(&out, 1), Some(join_collection(&[el(2)])));
        assert!(matches!(out.0[2], Bound::Unset));
        assert!(matches!(out.0[0], Bound::Int(7)));
        // The same element at another writetime is not there.
        let row = read_row(&[Some((&[el(1), el(2)], &[11, 10])), None]);
        let out = reduce(&checks, false, Some(&row), &values).unwrap();
        assert_eq!(value_at(&out, 1), Some(join_collection(&[el(1)])));
        assert_eq!(value_at(&out, 2), value_at(&values, 2));
    }

    #[test]
    fn a_guarded_append_with_nothing_left_is_not_sent() {
        let values = BoundRow(vec![Bound::Value(join_collection(&[el(1)]))]);
        let append = [check(0, 0, &[(el(1), 10)], true)];
        let row = read_row(&[Some((&[el(1)], &[10]))]);
        assert!(reduce(&append, false, Some(&row), &values).is_none());
        // Not there yet: sent as it is.
        let other = read_row(&[Some((&[el(2)], &[10]))]);
        let out = reduce(&append, false, Some(&other), &values).unwrap();
        assert_eq!(value_at(&out, 0), value_at(&values, 0));
        // A key-only row's write is left out when the row is there, sent when it is not.
        assert!(reduce(&[], true, Some(&read_row(&[])), &values).is_none());
        assert!(reduce(&[], true, None, &values).is_some());
        assert!(reduce(&[], false, Some(&read_row(&[])), &values).is_some());
    }

    #[test]
    fn udt_cells_pair_with_non_null_fields() {
        // Fields: a = 0x01, b = null, c = 0x0203.
        let value = Bytes::from(vec![0, 0, 0, 1, 1, 255, 255, 255, 255, 0, 0, 0, 2, 2, 3]);
        let got = udt_fields(&value, &[Some(5), Some(7)], &[None, Some(60)]).unwrap();
        assert_eq!(
            got,
            vec![
                (0, Bytes::from(vec![1]), 5, 0),
                (2, Bytes::from(vec![2, 3]), 7, 60)
            ]
        );
        assert!(udt_fields(&value, &[Some(5)], &[]).is_none());
    }

    #[test]
    fn udt_cells_pair_with_every_field_of_the_type() {
        // As Cassandra 5.0 answers: one entry per field, null for the null field `b`.
        let value = Bytes::from(vec![0, 0, 0, 1, 1, 255, 255, 255, 255, 0, 0, 0, 2, 2, 3]);
        let got = udt_fields(
            &value,
            &[Some(5), None, Some(7)],
            &[Some(86400), None, None],
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                (0, Bytes::from(vec![1]), 5, 86400),
                (2, Bytes::from(vec![2, 3]), 7, 0)
            ]
        );
        // A field holding a value needs its writetime.
        assert!(udt_fields(&value, &[Some(5), None, None], &[]).is_none());
        // A value whose last fields are left out (null): the type's entries are more than the
        // value's fields.
        let cut = Bytes::from(vec![0, 0, 0, 1, 1, 255, 255, 255, 255]);
        assert_eq!(
            udt_fields(&cut, &[Some(5), None, None], &[None, None, None]),
            Some(vec![(0, Bytes::from(vec![1]), 5, 0)])
        );
        // A value cut short is refused, not read past its end.
        let short = Bytes::from(vec![0, 0, 0, 9, 1]);
        assert!(udt_fields(&short, &[Some(5)], &[]).is_none());
    }
}
