//! Reading a CQL table token range by token range behind the seam's [`Scan`]: one select
//! statement, bound to each range, sent to a replica of the range and paged with the driver's
//! paging state. The copy and both sides of a validation read through it, each with its own
//! select (the validator's carries writetimes, TTLs and renamed columns).

use std::sync::Arc;

use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::prepared::PreparedStatement;

use super::rows::{Bound, BoundRow, RawRow};
use super::schema::TableSchema;
use super::units::{self, TokenUnit};
use crate::connectors::seam::{Page, Plan, Scan};
use crate::savepoints::{self, ranges::TokenRange};

/// A table read by token ranges through one prepared select.
pub struct RangeScan {
    session: Arc<Session>,
    /// The table read (for the replicas of a range).
    table: TableSchema,
    /// `... WHERE token(pk) > ? AND token(pk) <= ?`, bound to `(start, end)`.
    select: PreparedStatement,
    tokens: Vec<i64>,
    split_count: usize,
    local_dc: Option<String>,
}

/// Where a page of a [`TokenUnit`] starts.
#[derive(Clone)]
pub struct RangeCursor {
    piece: usize,
    /// The part of the piece read: the piece cut at the tokens of the ring read, so that one
    /// replica holds all of it (see [`RangeScan::cursor_at`]).
    range: TokenRange,
    statement: PreparedStatement,
    paging: PagingState,
}

impl RangeScan {
    /// Reads `table` through `select` (two bigint markers: start and end of a range). Units
    /// are planned from `session`'s ring, in `split_count` pieces.
    pub fn new(
        session: Arc<Session>,
        table: TableSchema,
        select: PreparedStatement,
        split_count: usize,
        local_dc: Option<String>,
    ) -> Self {
        let mut tokens = units::ring_tokens(&session);
        tokens.sort_unstable();
        Self {
            tokens,
            session,
            table,
            select,
            split_count,
            local_dc,
        }
    }

    /// What `system.size_estimates` says each unit of `work` holds, in partitions.
    pub async fn expected(
        &self,
        work: &[TokenUnit],
    ) -> Vec<Option<crate::connectors::seam::Expected>> {
        super::estimates::expected(&self.session, &self.table, work).await
    }

    /// Columns of the partition key, first in every row this scan reads.
    pub fn partition_key_len(&self) -> usize {
        self.table.partition_key.len()
    }

    /// The cursor of piece `piece` of `unit` from token `from` (exclusive) on: to the piece's
    /// end or to the first token of the ring read before it, whichever comes first. Units are
    /// planned from one ring (the source's); the other side of a validation, or a ring whose
    /// tokens moved, has other boundaries, and a range across one of them has no replica
    /// holding all of it: its coordinator would read the part past the boundary from another
    /// node (measured on the test rings: 49 range reads executed for 37 sent).
    fn cursor_at(&self, unit: &TokenUnit, piece: usize, from: i64) -> RangeCursor {
        let range = TokenRange {
            start: from,
            end: cut(&self.tokens, from, unit.pieces[piece].end),
        };
        let mut statement = self.select.clone();
        // Send the scan to a replica of the range, another one when it is down.
        statement.set_load_balancing_policy(Some(Arc::new(super::routing::RangeReplicas::new(
            &self.table.keyspace,
            &self.table.table,
            range.end,
            self.local_dc.as_deref(),
        ))));
        // The moment its TTLs count from is when the engine sent the request: no retry
        // inside the driver may move it (see `no_driver_retry`).
        statement.set_retry_policy(Some(super::retry::no_driver_retry()));
        RangeCursor {
            piece,
            range,
            statement,
            paging: PagingState::start(),
        }
    }
}

impl Scan for RangeScan {
    type Unit = TokenUnit;
    type Row = RawRow;
    type Cursor = RangeCursor;
    type Error = ExecutionError;

    /// The coordinator fixes the moment TTLs are counted from when it begins the read.
    const TTLS_COUNTED_AT_REQUEST: bool = true;

    fn plan(&self, done: &savepoints::Progress) -> Plan<TokenUnit> {
        units::plan(
            &self.tokens,
            self.split_count,
            done.ranges(&crate::savepoints::TOKEN_RANGES),
        )
    }

    fn start(&self, unit: &TokenUnit) -> RangeCursor {
        self.cursor_at(unit, 0, unit.pieces[0].start)
    }

    async fn page(
        &self,
        unit: &TokenUnit,
        cursor: &RangeCursor,
    ) -> Result<Page<RawRow, RangeCursor>, ExecutionError> {
        let range = cursor.range;
        let (rows, next) = read_page(
            &self.session,
            &cursor.statement,
            range.start,
            range.end,
            cursor.paging.clone(),
        )
        .await?;
        let next = match next {
            PagingStateResponse::HasMorePages { state } => Some(RangeCursor {
                paging: state,
                ..cursor.clone()
            }),
            PagingStateResponse::NoMorePages if range.end < unit.pieces[cursor.piece].end => {
                Some(self.cursor_at(unit, cursor.piece, range.end))
            }
            PagingStateResponse::NoMorePages if cursor.piece + 1 < unit.pieces.len() => {
                let piece = cursor.piece + 1;
                Some(self.cursor_at(unit, piece, unit.pieces[piece].start))
            }
            PagingStateResponse::NoMorePages => None,
        };
        Ok(Page {
            rows,
            next,
            measured: None,
        })
    }

    fn row_size(row: &RawRow) -> usize {
        row.size()
    }

    /// `system.size_estimates`, in partitions.
    async fn expect(&self, work: &[TokenUnit]) -> Vec<Option<crate::connectors::seam::Expected>> {
        self.expected(work).await
    }

    /// Partitions begun: the selects of copies and exports start with the partition key.
    fn measure(&self, rows: &[RawRow]) -> u64 {
        super::estimates::partitions_begun(rows, self.partition_key_len())
    }
}

/// Where a read from token `from` (exclusive) towards `end` stops: at the first of the sorted
/// ring `tokens` after `from` and before `end`, else at `end`.
fn cut(tokens: &[i64], from: i64, end: i64) -> i64 {
    match tokens.get(tokens.partition_point(|&t| t <= from)) {
        Some(&t) if t < end => t,
        _ => end,
    }
}

/// Reads one page of `(start, end]` through `statement` after `paging`.
async fn read_page(
    session: &Session,
    statement: &PreparedStatement,
    start: i64,
    end: i64,
    paging: PagingState,
) -> Result<(Vec<RawRow>, PagingStateResponse), ExecutionError> {
    let (result, next) = session
        .execute_single_page(
            statement,
            BoundRow(vec![Bound::BigInt(start), Bound::BigInt(end)]),
            paging,
        )
        .await?;
    // A scan answered with something other than rows is a protocol fault of the server.
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::ProtocolError,
            format!("{what}: {e}"),
        ))
    };
    let rows = result
        .into_rows_result()
        .map_err(|e| bad("scan returned no rows result", &e))?
        .rows::<RawRow>()
        .map_err(|e| bad("scan rows", &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad("scan row", &e))?;
    Ok((rows, next))
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn a_range_is_cut_at_each_ring_token_inside_it_and_nowhere_else() {
        let ring = [-100, 0, 100];
        // Tokens inside (from, end) cut it, one at a time.
        assert_eq!(cut(&ring, -200, 200), -100);
        assert_eq!(cut(&ring, -100, 200), 0);
        assert_eq!(cut(&ring, 0, 200), 100);
        assert_eq!(cut(&ring, 100, 200), 200);
        // A token at `from` (excluded) or at `end` (the end already) does not.
        assert_eq!(cut(&ring, -100, 0), 0);
        assert_eq!(cut(&ring, -1, 0), 0);
        assert_eq!(cut(&ring, -101, -100), -100);
        // Between two tokens, or with no ring known, the range is whole.
        assert_eq!(cut(&ring, 1, 99), 99);
        assert_eq!(cut(&[], i64::MIN, i64::MAX), i64::MAX);
        assert_eq!(cut(&ring, i64::MIN, i64::MAX), -100);
        assert_eq!(cut(&ring, 100, i64::MAX), i64::MAX);
    }
}
