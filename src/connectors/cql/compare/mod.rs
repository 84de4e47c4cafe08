//! The CQL connector's side of validation: the comparator of rows (Cassandra's order of rows
//! and of clustering values, cells equal within tolerances, writetimes and TTLs, keys rendered
//! as CQL conditions), the validation scans of both tables, and the repair of `copyMissingRows`.

pub mod equal;
pub mod order;
mod plan;
pub mod render;

use std::cmp::Ordering;

use bytes::Bytes;

pub use equal::Tolerance;
pub(crate) use plan::prepare;
pub use plan::rename_where;

use super::codec::{read_i32, read_i64, read_int_list};
use super::rows::RawRow;
use super::schema::{Column, TableSchema, quote};
use crate::connectors::seam::compare::{Cells, Comparator};
use crate::connectors::seam::compare::{ColumnDifference, ColumnDifferenceKind};

/// How the rows of both scans are laid out and compared. Rows hold the primary key, statics,
/// regular columns, then (with timestamps) WRITETIME and TTL of each static and regular
/// column, then the partition token; the target's are selected under the source's layout.
pub struct CqlComparator {
    source: TableSchema,
    /// Target name of each source column, in `source.all()` order.
    target_names: Vec<String>,
    np: usize,
    nc: usize,
    ns: usize,
    nr: usize,
    token_at: usize,
    clustering_desc: Vec<bool>,
    tolerance: Tolerance,
    compare_timestamps: bool,
    ttl_tolerance_ms: u64,
    writetime_tolerance_us: u64,
    fixed_ttl: Option<i32>,
    fixed_timestamp: Option<i64>,
}

impl Comparator for CqlComparator {
    type Row = RawRow;

    fn order(&self, a: &RawRow, b: &RawRow) -> Ordering {
        self.compare_rows(a, b)
    }

    fn same_partition(&self, a: &RawRow, b: &RawRow) -> bool {
        self.token_of(a) == self.token_of(b) && a.cells[..self.np] == b.cells[..self.np]
    }

    fn partition_only(&self, row: &RawRow) -> bool {
        self.nc > 0
            && row.cells[self.np..self.np + self.nc]
                .iter()
                .all(Option::is_none)
    }

    fn incomplete_key(&self, row: &RawRow) -> bool {
        row.cells[..self.np].iter().any(Option::is_none)
    }

    fn differences(&self, source: &RawRow, target: &RawRow, cells: Cells) -> Vec<ColumnDifference> {
        let (statics, regular) = match cells {
            Cells::Partition => (true, false),
            Cells::Row => (false, true),
            Cells::All => (true, true),
        };
        self.cell_differences(source, target, statics, regular)
    }

    fn key(&self, row: &RawRow) -> String {
        self.key_condition(row)
    }

    fn token(&self, row: &RawRow) -> i64 {
        self.token_of(row)
    }

    fn size(&self, row: &RawRow) -> usize {
        row.size()
    }
}

impl CqlComparator {
    fn token_of(&self, row: &RawRow) -> i64 {
        read_i64(&row.cells[self.token_at]).unwrap_or(i64::MIN)
    }

    /// Cassandra's order of rows: token, then partition key bytes (a token collision), then
    /// clustering columns by type (a missing clustering key, a static-only partition, first).
    fn compare_rows(&self, a: &RawRow, b: &RawRow) -> Ordering {
        let by_token = self.token_of(a).cmp(&self.token_of(b));
        if by_token.is_ne() {
            return by_token;
        }
        let pk = |r: &RawRow| -> Vec<u8> {
            if self.np == 1 {
                return r.cells[0].as_deref().unwrap_or_default().to_vec();
            }
            // The composite form Cassandra compares: [u16 length][bytes][0] per component.
            let mut out = Vec::new();
            for c in &r.cells[..self.np] {
                let v = c.as_deref().unwrap_or_default();
                out.extend_from_slice(&(v.len() as u16).to_be_bytes());
                out.extend_from_slice(v);
                out.push(0);
            }
            out
        };
        if a.cells[..self.np] != b.cells[..self.np] {
            let by_key = pk(a).cmp(&pk(b));
            if by_key.is_ne() {
                return by_key;
            }
        }
        for i in 0..self.nc {
            let col = &self.source.clustering_key[i];
            let o = match (&a.cells[self.np + i], &b.cells[self.np + i]) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (Some(x), Some(y)) => {
                    let o = order::compare(&col.typ, x, y);
                    if self.clustering_desc[i] {
                        o.reverse()
                    } else {
                        o
                    }
                }
            };
            if o.is_ne() {
                return o;
            }
        }
        Ordering::Equal
    }

    fn key_columns(&self) -> impl Iterator<Item = &Column> {
        self.source
            .partition_key
            .iter()
            .chain(&self.source.clustering_key)
    }

    /// The primary key as a CQL condition on the source table.
    fn key_condition(&self, row: &RawRow) -> String {
        self.key_columns()
            .enumerate()
            .filter_map(|(i, c)| {
                row.cells[i].as_deref().map(|v| {
                    format!(
                        "{} = {}",
                        quote_if_needed(&c.name),
                        render::render(&c.typ, Some(v))
                    )
                })
            })
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// The cells of two rows with the same key that differ: static cells when `statics` (the
    /// first row of each partition), regular cells when `regular`.
    fn cell_differences(
        &self,
        s: &RawRow,
        d: &RawRow,
        statics: bool,
        regular: bool,
    ) -> Vec<ColumnDifference> {
        let mut out = Vec::new();
        let first = self.np + self.nc;
        let value_cols = self.source.statics.iter().chain(&self.source.regular);
        for (j, col) in value_cols.enumerate() {
            if (j < self.ns && !statics) || (j >= self.ns && !regular) {
                continue;
            }
            let at = first + j;
            let target_name = &self.target_names[at];
            let diff = |kind, source: String, target: String| ColumnDifference {
                column: col.name.clone(),
                target_column: (target_name != &col.name).then(|| target_name.clone()),
                difference: kind,
                source,
                target,
            };
            let (sv, dv) = (&s.cells[at], &d.cells[at]);
            let kind = match (sv, dv) {
                (None, None) => None,
                (Some(_), None) => Some(ColumnDifferenceKind::MissingOnTarget),
                (None, Some(_)) => Some(ColumnDifferenceKind::ExtraOnTarget),
                (Some(a), Some(b)) => (!equal::equal(&col.typ, a, b, &self.tolerance))
                    .then_some(ColumnDifferenceKind::Value),
            };
            if let Some(kind) = kind {
                out.push(diff(
                    kind,
                    render::render(&col.typ, sv.as_deref()),
                    render::render(&col.typ, dv.as_deref()),
                ));
                continue;
            }
            if !self.compare_timestamps || sv.is_none() {
                continue;
            }
            let m = self.np + self.nc + self.ns + self.nr + 2 * j;
            let (swt, dwt) = (&s.cells[m], &d.cells[m]);
            if !self.writetimes_match(col, swt, dwt) {
                out.push(diff(
                    ColumnDifferenceKind::Writetime,
                    render_meta(swt),
                    render_meta(dwt),
                ));
            }
            let (sttl, dttl) = (&s.cells[m + 1], &d.cells[m + 1]);
            if !self.ttls_match(col, sttl, dttl) {
                out.push(diff(
                    ColumnDifferenceKind::Ttl,
                    render_meta(sttl),
                    render_meta(dttl),
                ));
            }
        }
        out
    }

    /// Whether the writetimes of a cell (one per element of a multi-cell column) are within
    /// the tolerance of the source's (or of `writeWritetimestampInuS`).
    fn writetimes_match(&self, col: &Column, s: &Option<Bytes>, d: &Option<Bytes>) -> bool {
        let tol = self.writetime_tolerance_us;
        let (a, b) = (meta_numbers(col, s), meta_numbers(col, d));
        a.len() == b.len()
            && a.iter()
                .zip(&b)
                .all(|(x, y)| match (self.fixed_timestamp.or(*x), y) {
                    (Some(x), Some(y)) => x.abs_diff(*y) <= tol,
                    (None, None) => true,
                    _ => false,
                })
    }

    /// Whether the TTLs of a cell are within the tolerance of the source's. TTLs are read in
    /// seconds, the tolerance is in ms. With `writeTTLInS` the target's TTL counts down from
    /// that value since the copy: it must be set and at most that value (0 meaning none).
    fn ttls_match(&self, col: &Column, s: &Option<Bytes>, d: &Option<Bytes>) -> bool {
        let tol = self.ttl_tolerance_ms;
        let (a, b) = (meta_numbers(col, s), meta_numbers(col, d));
        a.len() == b.len()
            && a.iter().zip(&b).all(|(x, y)| match (self.fixed_ttl, x, y) {
                (Some(0), _, y) => y.is_none(),
                (Some(t), _, Some(y)) => *y > 0 && *y <= i64::from(t),
                (Some(_), _, None) => false,
                (None, Some(x), Some(y)) => x.abs_diff(*y).saturating_mul(1000) <= tol,
                (None, None, None) => true,
                (None, _, _) => false,
            })
    }
}

/// The numbers of a WRITETIME or TTL cell: one per element for a multi-cell column (Cassandra
/// 5.0 returns a list), else one (`None` for no TTL).
fn meta_numbers(col: &Column, c: &Option<Bytes>) -> Vec<Option<i64>> {
    if col.is_multi_cell() {
        return read_int_list(c).unwrap_or_default();
    }
    vec![read_i64(c).or_else(|| read_i32(c).map(i64::from))]
}

/// A column name as CQL needs it in a condition: bare when it reads the same unquoted.
fn quote_if_needed(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain { name.to_string() } else { quote(name) }
}

/// A WRITETIME or TTL cell: a number, a list for a multi-cell column, `null` for none.
fn render_meta(c: &Option<Bytes>) -> String {
    if let Some(v) = read_i64(c) {
        return v.to_string();
    }
    if let Some(v) = read_i32(c) {
        return v.to_string();
    }
    match read_int_list(c) {
        Some(list) => format!(
            "[{}]",
            list.iter()
                .map(|x| x.map_or("null".to_string(), |v| v.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => "null".to_string(),
    }
}

#[cfg(test)]
mod merge_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_stay_bare() {
        assert_eq!(quote_if_needed("id"), "id");
        assert_eq!(quote_if_needed("Id"), "\"Id\"");
        assert_eq!(quote_if_needed("a b"), "\"a b\"");
    }
}
