//! The validator's reads and writes on a CQL table: each side's scan of a token range (its
//! own select, with writetimes, TTLs and renamed columns), and the repair of
//! `copyMissingRows` through the migration's copy plan.

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use scylla::client::session::Session;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::prepared::PreparedStatement;
use tokio_util::sync::CancellationToken;

use crate::connectors::cql::copy::{CopyPlan, RowStats, Write};
use crate::connectors::cql::rows::{Bound, BoundRow, RawRow};
use crate::connectors::cql::schema::TableSchema;
use crate::migrate::EngineError;
use crate::migrate::engine::{self, Progress as ScanProgress};
use crate::savepoints::ranges::TokenRange;
use crate::validate::compare::Repair;
use crate::validate::run::SideScan;

/// One table's scan for a validation.
pub struct ValidationScan {
    /// `source` or `target`, for messages.
    pub(super) side: &'static str,
    pub(super) session: Arc<Session>,
    pub(super) table: TableSchema,
    /// Bind `(start, end)` as bigints.
    pub(super) select: PreparedStatement,
    pub(super) local_dc: Option<String>,
}

/// Where a range's next page starts: the statement of the range (sent to a replica of it) and
/// the driver's paging state.
pub struct ScanCursor {
    statement: PreparedStatement,
    paging: PagingState,
}

impl ValidationScan {
    fn first(&self, range: TokenRange) -> ScanCursor {
        let mut statement = self.select.clone();
        // Send the scan to a replica of the range; a retry may go elsewhere.
        if let Some(node) = super::super::replica_for(
            &self.session,
            &self.table,
            range.end,
            self.local_dc.as_deref(),
        ) {
            statement.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
                NodeIdentifier::Node(node),
                None,
            )));
        }
        ScanCursor {
            statement,
            paging: PagingState::start(),
        }
    }
}

impl SideScan for ValidationScan {
    type Row = RawRow;
    type Cursor = ScanCursor;

    async fn page(
        &self,
        range: TokenRange,
        cursor: Option<ScanCursor>,
        progress: &ScanProgress,
        cancel: &CancellationToken,
    ) -> Result<(Vec<RawRow>, Option<ScanCursor>), EngineError> {
        let side = self.side;
        let ScanCursor { statement, paging } = cursor.unwrap_or_else(|| self.first(range));
        let what = if side == "source" {
            "reading from the source"
        } else {
            "reading from the target"
        };
        let page = engine::retry(progress, cancel, what, true, || {
            self.session.execute_single_page(
                &statement,
                BoundRow(vec![Bound::BigInt(range.start), Bound::BigInt(range.end)]),
                paging.clone(),
            )
        })
        .await;
        let (result, next) = match page {
            Ok(p) => p,
            Err(_) if cancel.is_cancelled() => return Err(EngineError::Stopped),
            Err(e) => {
                return Err(EngineError::Failed(format!("{side}: reading {range}: {e}")));
            }
        };
        let rows = result
            .into_rows_result()
            .map_err(|e| e.to_string())
            .and_then(|r| {
                r.rows::<RawRow>()
                    .map_err(|e| e.to_string())?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| EngineError::Failed(format!("{side}: reading {range}: {e}")))?;
        let next = match next {
            PagingStateResponse::HasMorePages { state } => Some(ScanCursor {
                statement,
                paging: state,
            }),
            PagingStateResponse::NoMorePages => None,
        };
        Ok((rows, next))
    }
}

/// `copyMissingRows`: how rows are written to the target again.
pub struct CqlRepair {
    pub(super) plan: Arc<CopyPlan>,
    pub(super) session: Arc<Session>,
}

impl Repair<RawRow> for CqlRepair {
    fn copy<'a>(
        &'a self,
        row: &'a RawRow,
        read_at: Instant,
        progress: &'a ScanProgress,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<(), EngineError>> {
        Box::pin(async move {
            let mut writes: Vec<Write> = Vec::new();
            self.plan
                .writes(row, true, &mut RowStats::default(), &mut writes);
            for w in &writes {
                engine::retry(
                    progress,
                    cancel,
                    "copying a row to the target",
                    w.idempotent,
                    || w.execute(&self.session, read_at.elapsed()),
                )
                .await
                .map_err(|e| {
                    if cancel.is_cancelled() {
                        EngineError::Stopped
                    } else {
                        EngineError::Failed(format!("target: copying a row: {e}"))
                    }
                })?;
            }
            Ok(())
        })
    }
}
