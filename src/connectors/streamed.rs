//! Units read by a task of their own: a source whose reads cannot restart at a cursor (a MySQL
//! result set, a gzipped download) streams each unit from a task into a channel of one page,
//! and the [`Scan`](super::seam::Scan)'s `page` takes the next page from it. A page asked for
//! at another cursor than the stream's (a retry after an error) starts the unit's stream
//! again from its first page.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use tokio::sync::mpsc;

use super::seam::Page;

/// A page of a unit, whether it is the unit's last, and how much of the unit's expected
/// measure it covers when the reader counts it ([`Page::measured`]).
pub type Sent<R, E> = Result<(Vec<R>, bool, Option<u64>), E>;
/// Where a unit's task sends its pages.
pub type PageSender<R, E> = mpsc::Sender<Sent<R, E>>;

/// The units being read, by key.
pub struct Streams<R, E> {
    open: Mutex<HashMap<String, Open<R, E>>>,
}

impl<R, E> Default for Streams<R, E> {
    fn default() -> Self {
        Self {
            open: Mutex::new(HashMap::new()),
        }
    }
}

/// A unit being read: where its stream stands, and the task that reads it.
struct Open<R, E> {
    next: u64,
    pages: mpsc::Receiver<Sent<R, E>>,
    task: tokio::task::JoinHandle<()>,
}

impl<R, E> Drop for Open<R, E> {
    fn drop(&mut self) {
        // A unit stopped or started again: its reading task ends with it.
        self.task.abort();
    }
}

impl<R: Send + 'static, E: Send + 'static> Streams<R, E> {
    /// The page at `cursor` of unit `key`, from its stream, started with `start` when there is
    /// none at that cursor. `gone` is the error when the task ended without a page.
    pub async fn page<Fut>(
        &self,
        key: &str,
        cursor: u64,
        start: impl FnOnce(PageSender<R, E>) -> Fut,
        gone: impl FnOnce() -> E,
    ) -> Result<Page<R, u64>, E>
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        let taken = self
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
        let mut open = match taken {
            Some(open) if open.next == cursor => open,
            _ => {
                if cursor > 0 {
                    // Its first rows are written again (the same values).
                    tracing::warn!(unit = %key, "reading the unit again from its start");
                }
                let (tx, rx) = mpsc::channel(1);
                Open {
                    next: cursor,
                    pages: rx,
                    task: tokio::spawn(start(tx)),
                }
            }
        };
        match open.pages.recv().await {
            Some(Ok((rows, last, measured))) => {
                let next = if last {
                    None
                } else {
                    open.next += 1;
                    let at = open.next;
                    self.open
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(key.to_string(), open);
                    Some(at)
                };
                Ok(Page {
                    rows,
                    next,
                    measured,
                })
            }
            Some(Err(e)) => Err(e),
            None => Err(gone()),
        }
    }
}
