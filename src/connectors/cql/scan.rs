//! Reading a CQL table token range by token range behind the seam's [`Scan`]: one select
//! statement, bound to each range, sent to a replica of the range and paged with the driver's
//! paging state. The copy and both sides of a validation read through it, each with its own
//! select (the validator's carries writetimes, TTLs and renamed columns).

use std::sync::Arc;

use scylla::client::session::Session;
use scylla::cluster::Node;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::prepared::PreparedStatement;

use super::rows::{Bound, BoundRow, RawRow};
use super::schema::TableSchema;
use super::units::{self, TokenUnit};
use crate::connectors::seam::{Page, Plan, Scan};
use crate::savepoints;

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
    statement: PreparedStatement,
    /// The replica `statement` is sent to, if any.
    node: Option<Arc<Node>>,
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
        Self {
            tokens: units::ring_tokens(&session),
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

    fn cursor_at(&self, unit: &TokenUnit, piece: usize) -> RangeCursor {
        let (statement, node) = self.pinned(unit.pieces[piece].end);
        RangeCursor {
            piece,
            statement,
            node,
            paging: PagingState::start(),
        }
    }

    /// The select sent to a connected replica of `token` (see [`super::replica_for`]).
    fn pinned(&self, token: i64) -> (PreparedStatement, Option<Arc<Node>>) {
        let mut statement = self.select.clone();
        let node = super::replica_for(&self.session, &self.table, token, self.local_dc.as_deref());
        if let Some(node) = &node {
            statement.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
                NodeIdentifier::Node(node.clone()),
                None,
            )));
        }
        (statement, node)
    }
}

impl Scan for RangeScan {
    type Unit = TokenUnit;
    type Row = RawRow;
    type Cursor = RangeCursor;
    type Error = ExecutionError;

    fn plan(&self, done: &savepoints::Progress) -> Plan<TokenUnit> {
        units::plan(&self.tokens, self.split_count, &done.token_ranges)
    }

    fn start(&self, unit: &TokenUnit) -> RangeCursor {
        self.cursor_at(unit, 0)
    }

    async fn page(
        &self,
        unit: &TokenUnit,
        cursor: &RangeCursor,
    ) -> Result<Page<RawRow, RangeCursor>, ExecutionError> {
        let piece = unit.pieces[cursor.piece];
        // The replica this range was sent to went down (or the range was planned while none was
        // connected): another replica, or the session's policy, reads the page instead, from
        // the same paging state (a paging state is valid on any coordinator). Without this, a
        // unit begun on a node that stops would retry that node alone until the job gives up.
        let repinned = match &cursor.node {
            Some(node) if node.is_connected() => None,
            _ => Some(self.pinned(piece.end)),
        };
        let (statement, node) = match &repinned {
            Some((statement, node)) => (statement, node),
            None => (&cursor.statement, &cursor.node),
        };
        let (rows, next) = read_page(
            &self.session,
            statement,
            piece.start,
            piece.end,
            cursor.paging.clone(),
        )
        .await?;
        let next = match next {
            PagingStateResponse::HasMorePages { state } => Some(RangeCursor {
                piece: cursor.piece,
                statement: statement.clone(),
                node: node.clone(),
                paging: state,
            }),
            PagingStateResponse::NoMorePages if cursor.piece + 1 < unit.pieces.len() => {
                Some(self.cursor_at(unit, cursor.piece + 1))
            }
            PagingStateResponse::NoMorePages => None,
        };
        Ok(Page { rows, next })
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
