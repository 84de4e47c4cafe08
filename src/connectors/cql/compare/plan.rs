//! Planning a validation of two CQL tables: the clustering orders, the select statements of
//! both sides (the target's under its renamed columns, with the source's `where` rewritten to
//! match), and the comparator laid out after them.

use std::sync::Arc;

use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;

use super::{CqlComparator, Tolerance};
use crate::connectors::cql::copy::CopyPlan;
use crate::connectors::cql::rows::RawRow;
use crate::connectors::cql::scan::RangeScan;
use crate::connectors::cql::schema::{Column, clustering_order, quote};
use crate::connectors::cql::transfer::{CopySink, DEFAULT_SPLIT_COUNT, DEFAULT_UNITS_AT_ONCE};
use crate::connectors::cql::{self, CqlError, CqlSource, CqlTarget};
use crate::connectors::seam::Pacing;
use crate::connectors::seam::compare::Sides;
use crate::connectors::seam::compare::{Repair, SinkRepair};
use crate::jobfile::{Rename, RepairWritetimeStrategy, ValidationConfig};

/// Both tables of a CQL validation, each read through its own select.
pub(crate) type CqlSides = Sides<CqlComparator, RangeScan>;

/// Selected expressions of one side, and the statement.
fn select_list(schema_cols: &[(&Column, String)], timestamps: &[String], pk: &[String]) -> String {
    let mut cols: Vec<String> = schema_cols.iter().map(|(_, n)| quote(n)).collect();
    for name in timestamps {
        cols.push(format!("WRITETIME({})", quote(name)));
        cols.push(format!("TTL({})", quote(name)));
    }
    cols.push(format!(
        "token({})",
        pk.iter().map(|p| quote(p)).collect::<Vec<_>>().join(", ")
    ));
    cols.join(", ")
}

/// Rewrites the column names of a source `where` condition into the target's (after
/// `renames`): identifiers outside string literals that name a renamed source column.
pub fn rename_where(clause: &str, renamed: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(clause.len());
    let chars: Vec<char> = clause.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // A string literal, '' inside is a quote.
            let start = i;
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' {
                    if chars.get(i + 1) == Some(&'\'') {
                        i += 2;
                        continue;
                    }
                    break;
                }
                i += 1;
            }
            i = (i + 1).min(chars.len());
            out.extend(&chars[start..i]);
        } else if c == '"' {
            let start = i;
            i += 1;
            let mut name = String::new();
            while i < chars.len() {
                if chars[i] == '"' {
                    if chars.get(i + 1) == Some(&'"') {
                        name.push('"');
                        i += 2;
                        continue;
                    }
                    break;
                }
                name.push(chars[i]);
                i += 1;
            }
            i = (i + 1).min(chars.len());
            match renamed(&name) {
                Some(to) => out.push_str(&quote(&to)),
                None => out.extend(&chars[start..i]),
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            // Unquoted identifiers are case-insensitive.
            match renamed(&word.to_lowercase()) {
                Some(to) => out.push_str(&quote(&to)),
                None => out.push_str(&word),
            }
        } else if c.is_ascii_digit() {
            // Numbers, UUIDs and blobs never name a column.
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '-') {
                out.push(chars[i]);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

async fn prepare_scan(
    session: &Session,
    side: &str,
    cql: &str,
    consistency: scylla::statement::Consistency,
    fetch_size: usize,
) -> Result<PreparedStatement, CqlError> {
    let mut st = session.prepare(cql).await.map_err(|e| CqlError::Request {
        side: side.to_string(),
        message: format!("cannot prepare `{cql}`: {e}"),
    })?;
    st.set_page_size(i32::try_from(fetch_size).unwrap_or(i32::MAX));
    st.set_consistency(consistency);
    st.set_is_idempotent(true);
    Ok(st)
}

/// Connects to both tables, checks them as a migration would (and that their clustering
/// orders agree), and prepares both scans and the repair. Nothing is written.
pub(crate) async fn prepare(
    src: &CqlSource,
    dst: &CqlTarget,
    renames: &[Rename],
    v: &ValidationConfig,
) -> Result<CqlSides, CqlError> {
    let cql::Pair {
        source,
        target,
        source_schema,
        target_schema,
        mapping,
    } = cql::open_pair(src, dst, renames).await?;
    let (src_desc, dst_desc) = tokio::try_join!(
        clustering_order(&source, "source", &source_schema),
        clustering_order(&target, "target", &target_schema)
    )?;
    if src_desc != dst_desc {
        return Err(CqlError::Invalid {
            key: "target.table".into(),
            message: "the clustering order (ASC/DESC) of the target differs from the source's; rows cannot be compared in order".into(),
        });
    }
    let counter = source_schema.is_counter_table();
    let compare_timestamps = v.compare_timestamps.unwrap_or(src.preserve_timestamps) && !counter;
    let copy_meta =
        (v.copy_missing_rows || v.copy_differing_rows) && src.preserve_timestamps && !counter;
    let meta = compare_timestamps || copy_meta;

    let cols: Vec<(&Column, String)> = source_schema.all().map(|c| (c, c.name.clone())).collect();
    let target_cols: Vec<(&Column, String)> = source_schema
        .all()
        .map(|c| (c, mapping[&c.name].clone()))
        .collect();
    let timestamped: Vec<&Column> = if meta {
        source_schema
            .statics
            .iter()
            .chain(&source_schema.regular)
            .collect()
    } else {
        vec![]
    };
    let src_ts: Vec<String> = timestamped.iter().map(|c| c.name.clone()).collect();
    let dst_ts: Vec<String> = timestamped
        .iter()
        .map(|c| mapping[&c.name].clone())
        .collect();
    let src_pk: Vec<String> = source_schema
        .partition_key
        .iter()
        .map(|c| c.name.clone())
        .collect();
    let dst_pk: Vec<String> = src_pk.iter().map(|n| mapping[n].clone()).collect();
    let range = |pk: &[String]| {
        let pk = pk.iter().map(|p| quote(p)).collect::<Vec<_>>().join(", ");
        format!("token({pk}) > ? AND token({pk}) <= ?")
    };
    let mut src_cql = format!(
        "SELECT {} FROM {} WHERE {}",
        select_list(&cols, &src_ts, &src_pk),
        source_schema.qualified(),
        range(&src_pk)
    );
    let mut dst_cql = format!(
        "SELECT {} FROM {} WHERE {}",
        select_list(&target_cols, &dst_ts, &dst_pk),
        target_schema.qualified(),
        range(&dst_pk)
    );
    if let Some(w) = &src.where_clause {
        src_cql.push_str(&format!(" AND {w} ALLOW FILTERING"));
        let renamed = |name: &str| {
            source_schema
                .all()
                .find(|c| c.name == name)
                .map(|c| mapping[&c.name].clone())
                .filter(|to| to != name)
        };
        dst_cql.push_str(&format!(
            " AND {} ALLOW FILTERING",
            rename_where(w, &renamed)
        ));
    }
    let src_select = prepare_scan(
        &source,
        "source",
        &src_cql,
        src.endpoint.consistency_level.into(),
        src.fetch_size,
    )
    .await?;
    let dst_select = prepare_scan(
        &target,
        "target",
        &dst_cql,
        dst.endpoint.consistency_level.into(),
        src.fetch_size,
    )
    .await?;
    let copy = if v.copy_missing_rows || v.copy_differing_rows {
        let plan = CopyPlan::prepare(
            &source,
            &target,
            src,
            dst,
            source_schema.clone(),
            target_schema.clone(),
            &mapping,
        )
        .await?;
        let missing = repair_timestamp(
            v.copy_missing_rows,
            v.repair_writetime_strategy,
            src,
            dst,
            counter,
        )?
        .map(|micros| Arc::new(plan.at_timestamp(micros)));
        Some((Arc::new(plan), missing))
    } else {
        None
    };

    let np = source_schema.partition_key.len();
    let nc = source_schema.clustering_key.len();
    let ns = source_schema.statics.len();
    let nr = source_schema.regular.len();
    let comparator = CqlComparator {
        target_names: target_cols.iter().map(|(_, n)| n.clone()).collect(),
        np,
        nc,
        ns,
        nr,
        token_at: np + nc + ns + nr + 2 * timestamped.len(),
        clustering_desc: src_desc,
        tolerance: Tolerance {
            floating_point: v.floating_point_tolerance,
            timestamp_ms: i64::try_from(v.timestamp_ms_tolerance).unwrap_or(i64::MAX),
            strip_decimals: dst.strip_trailing_zeros_for_decimals,
        },
        compare_timestamps,
        ttl_tolerance_ms: v.ttl_tolerance_millis,
        writetime_tolerance_us: v.writetime_tolerance_millis.saturating_mul(1000),
        // What the copy wrote: fixed values only where it did not keep the source's.
        fixed_ttl: dst.write_ttl_in_s.filter(|_| !src.preserve_timestamps),
        fixed_timestamp: dst
            .write_writetimestamp_in_us
            .filter(|_| !src.preserve_timestamps),
        source: source_schema,
    };
    let source = Arc::new(source);
    let target = Arc::new(target);
    let split_count = src.split_count.unwrap_or(DEFAULT_SPLIT_COUNT);
    Ok(Sides {
        source: RangeScan::new(
            source,
            comparator.source.clone(),
            src_select,
            split_count,
            src.endpoint.local_dc.clone(),
        ),
        target: RangeScan::new(
            target.clone(),
            target_schema,
            dst_select,
            split_count,
            dst.endpoint.local_dc.clone(),
        ),
        comparator,
        repair: copy.map(|(plan, missing)| {
            let missing = missing.unwrap_or_else(|| plan.clone());
            Box::new(CqlRepair {
                differing: v
                    .copy_differing_rows
                    .then(|| SinkRepair(CopySink::new(target.clone(), plan))),
                missing: v
                    .copy_missing_rows
                    .then(|| SinkRepair(CopySink::new(target.clone(), missing))),
            }) as Box<dyn Repair<RawRow>>
        }),
        pacing: Pacing {
            units_finishing: 0,
            units_at_once: src.max_concurrent_units.unwrap_or(DEFAULT_UNITS_AT_ONCE),
            requests_in_flight: dst.max_in_flight,
            rows_per_second: dst.rows_per_second,
            bytes_per_second: dst.bytes_per_second,
        },
    })
}

/// The writetime of the rows `copyMissingRows` writes because the target lacks them, when it
/// is not the source's (`repairWritetimeStrategy`); checked before anything is read.
fn repair_timestamp(
    copy_missing: bool,
    strategy: RepairWritetimeStrategy,
    src: &CqlSource,
    dst: &CqlTarget,
    counter: bool,
) -> Result<Option<i64>, CqlError> {
    if copy_missing
        && strategy == RepairWritetimeStrategy::Config
        && dst.write_writetimestamp_in_us.is_none()
    {
        return Err(CqlError::Invalid {
            key: "validation.repairWritetimeStrategy".into(),
            message: "config needs target.writeWritetimestampInuS (the writetime, in microseconds, of the rows copied back)".into(),
        });
    }
    if strategy == RepairWritetimeStrategy::Source {
        return Ok(None);
    }
    if !src.preserve_timestamps || counter {
        tracing::warn!(
            "validation.repairWritetimeStrategy {strategy:?} applies to copies that keep writetimes \
             (source.preserveTimestamps, not a counter table); missing rows are written at the \
             target's time"
        );
        return Ok(None);
    }
    let micros = match strategy {
        RepairWritetimeStrategy::Config => dst.write_writetimestamp_in_us,
        _ => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            // Milliseconds, as ScyllaDB Migrator takes them, in microseconds.
            Some(
                i64::try_from(now.as_millis())
                    .unwrap_or(i64::MAX)
                    .saturating_mul(1000),
            )
        }
    };
    tracing::info!(
        "validation.repairWritetimeStrategy {strategy:?}: rows missing from the target are written \
         back at writetime {} µs, newer than deletions made on the target before it; rows that \
         differ keep the source's writetimes",
        micros.unwrap_or_default()
    );
    Ok(micros)
}

/// `copyMissingRows` and `copyDifferingRows`: a missing row is written at the writetime
/// `repairWritetimeStrategy` says, a differing one always with the source's (never over a
/// target change newer than the source's).
struct CqlRepair {
    differing: Option<SinkRepair<CopySink>>,
    missing: Option<SinkRepair<CopySink>>,
}

impl Repair<RawRow> for CqlRepair {
    fn repairs_missing(&self) -> bool {
        self.missing.is_some()
    }

    fn repairs_differing(&self) -> bool {
        self.differing.is_some()
    }

    fn copy<'a>(
        &'a self,
        row: &'a RawRow,
        read_at: std::time::Instant,
        retries: &'a crate::connectors::seam::retry::Retries,
        cancel: &'a tokio_util::sync::CancellationToken,
    ) -> futures::future::BoxFuture<'a, Result<(), crate::connectors::seam::SeamError>> {
        match &self.differing {
            Some(d) => d.copy(row, read_at, retries, cancel),
            None => Box::pin(async { Ok(()) }),
        }
    }

    fn copy_missing<'a>(
        &'a self,
        row: &'a RawRow,
        read_at: std::time::Instant,
        retries: &'a crate::connectors::seam::retry::Retries,
        cancel: &'a tokio_util::sync::CancellationToken,
    ) -> futures::future::BoxFuture<'a, Result<(), crate::connectors::seam::SeamError>> {
        match &self.missing {
            Some(m) => m.copy(row, read_at, retries, cancel),
            None => Box::pin(async { Ok(()) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_conditions_follow_renames() {
        let renamed = |n: &str| match n {
            "v" => Some("value".to_string()),
            "Weird" => Some("w2".to_string()),
            _ => None,
        };
        assert_eq!(
            rename_where("v > 3 AND name = 'v' AND \"Weird\" = 1", &renamed),
            "\"value\" > 3 AND name = 'v' AND \"w2\" = 1"
        );
        assert_eq!(
            rename_where("V IN (1, 2) and x = 'it''s v'", &renamed),
            "\"value\" IN (1, 2) and x = 'it''s v'"
        );
        assert_eq!(
            rename_where("id = 123e4567-e89b-12d3-a456-426614174000", &renamed),
            "id = 123e4567-e89b-12d3-a456-426614174000"
        );
    }
}
