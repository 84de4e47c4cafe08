//! The JMX importer: one JVM kept running beside the node (`DroverJmxImport.java`, run in
//! Java's source-file mode) that calls the node's `importNewSSTables` for each batch. A
//! `nodetool import` starts a JVM per batch, about a second of CPU and of waiting each time,
//! which was most of an import's time in the bulk benchmark; the call itself takes a few
//! hundred milliseconds.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::oneshot;

use super::ImportOptions;

/// The helper's source, written under the state directory at the first import.
const SOURCE: &str = include_str!("DroverJmxImport.java");

/// How long the JVM may take to compile the helper and say it is ready.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes of the helper's standard error kept for messages.
const STDERR_KEPT: usize = 4096;

/// What a call answered: the directories the node could not import, or why it failed.
type Reply = Result<Vec<PathBuf>, String>;

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>;

/// What the helper wrote on its standard error, on one line.
fn said(kept: &Mutex<String>) -> String {
    let k = kept.lock().unwrap_or_else(|p| p.into_inner());
    crate::answer::cap(&k.split_whitespace().collect::<Vec<_>>().join(" ")).into_owned()
}

/// A running helper.
struct Helper {
    /// Killed when the helper is dropped (replaced after a timeout or an exit).
    _child: Child,
    stdin: tokio::sync::Mutex<ChildStdin>,
    pending: Pending,
    stderr: Arc<Mutex<String>>,
    /// Set when its output ended (it exited).
    dead: Arc<AtomicBool>,
}

/// The node's importer through JMX.
pub(super) struct JmxImporter {
    java: PathBuf,
    host: String,
    port: u16,
    source: PathBuf,
    helper: tokio::sync::Mutex<Option<Arc<Helper>>>,
    next_id: AtomicU64,
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    Some(String::from_utf8_lossy(&bytes?).into_owned())
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The line that asks for one import.
fn request(
    id: u64,
    keyspace: &str,
    table: &str,
    options: &ImportOptions,
    dirs: &[&Path],
) -> String {
    let flags: String = [
        options.reset_level,
        options.clear_repaired,
        options.verify_sstables,
        options.verify_tokens,
        options.invalidate_caches,
        options.extended_verify,
        options.copy_data,
    ]
    .iter()
    .map(|on| if *on { '1' } else { '0' })
    .collect();
    let mut line = format!("{id}\t{}\t{}\t{flags}", hex(keyspace), hex(table));
    for dir in dirs {
        line.push('\t');
        line.push_str(&hex(&dir.to_string_lossy()));
    }
    line.push('\n');
    line
}

/// A reply line: its id and what it says.
fn parse_reply(line: &str) -> Option<(u64, Reply)> {
    let mut parts = line.splitn(3, '\t');
    let id = parts.next()?.parse().ok()?;
    let kind = parts.next()?;
    let rest = parts.next().unwrap_or("");
    match kind {
        "ok" => {
            let failed: Option<Vec<PathBuf>> = rest
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|h| unhex(h).map(PathBuf::from))
                .collect();
            Some((id, Ok(failed?)))
        }
        "err" => {
            let message = unhex(rest)?;
            Some((
                id,
                Err(message.split_whitespace().collect::<Vec<_>>().join(" ")),
            ))
        }
        _ => None,
    }
}

impl JmxImporter {
    /// An importer for the node whose JMX is at `jmx` (`host:port`, default
    /// `127.0.0.1:7199` as for nodetool), with the helper's source kept in `dir`.
    pub fn new(java: PathBuf, jmx: Option<&str>, dir: &Path) -> Self {
        let (host, port) = match jmx {
            Some(jmx) => {
                let (host, port) = jmx.rsplit_once(':').unwrap_or((jmx, "7199"));
                (
                    host.trim_start_matches('[')
                        .trim_end_matches(']')
                        .to_string(),
                    port.parse().unwrap_or(7199),
                )
            }
            None => ("127.0.0.1".to_string(), 7199),
        };
        Self {
            java,
            host,
            port,
            source: dir.join("DroverJmxImport.java"),
            helper: tokio::sync::Mutex::new(None),
            next_id: AtomicU64::new(1),
        }
    }

    /// Where the node's JMX is, for messages.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The running helper, started (again) when there is none or it has exited.
    async fn helper(&self) -> Result<Arc<Helper>, String> {
        let mut slot = self.helper.lock().await;
        if let Some(h) = slot.as_ref()
            && !h.dead.load(Ordering::Acquire)
        {
            return Ok(h.clone());
        }
        *slot = None;
        let h = Arc::new(self.start().await?);
        *slot = Some(h.clone());
        Ok(h)
    }

    async fn start(&self) -> Result<Helper, String> {
        let shown = self.java.display();
        if let Some(dir) = self.source.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        crate::fsutil::write_atomic(&self.source, SOURCE.as_bytes())
            .map_err(|e| format!("{}: {e}", self.source.display()))?;
        let mut child = tokio::process::Command::new(&self.java)
            .args([
                "-Xmx64m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-XX:-UsePerfData",
            ])
            .arg(&self.source)
            .arg(&self.host)
            .arg(self.port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                format!(
                    "the JMX importer could not be started ({shown}, sstable_uploads.java): {e}"
                )
            })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let kept = Arc::new(Mutex::new(String::new()));
        {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = stderr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let mut k = kept.lock().unwrap_or_else(|p| p.into_inner());
                    k.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if k.len() > STDERR_KEPT {
                        let cut = k.len() - STDERR_KEPT;
                        let cut = (cut..k.len()).find(|i| k.is_char_boundary(*i)).unwrap_or(0);
                        k.drain(..cut);
                    }
                }
            });
        }
        let mut lines = BufReader::new(stdout).lines();
        match tokio::time::timeout(START_TIMEOUT, lines.next_line()).await {
            Ok(Ok(Some(line))) if line == "ready" => {}
            Err(_) => {
                return Err(format!(
                    "the JMX importer ({shown}) was not ready within {}s",
                    START_TIMEOUT.as_secs()
                ));
            }
            _ => {
                // Let the JVM finish saying why before reading it.
                let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                return Err(format!(
                    "the JMX importer ({shown} in source-file mode, which needs a JDK; or set sstable_uploads.importer: nodetool) did not start: {}",
                    said(&kept)
                ));
            }
        }
        let pending: Pending = Arc::default();
        let dead = Arc::new(AtomicBool::new(false));
        {
            let pending = pending.clone();
            let kept = kept.clone();
            let dead = dead.clone();
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some((id, reply)) = parse_reply(&line)
                        && let Some(tx) = pending
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .remove(&id)
                    {
                        let _ = tx.send(reply);
                    }
                }
                // The helper is gone: whoever waits learns why; the next import starts another.
                dead.store(true, Ordering::Release);
                let why = format!("the JMX importer exited: {}", said(&kept));
                let mut p = pending.lock().unwrap_or_else(|p| p.into_inner());
                for (_, tx) in p.drain() {
                    let _ = tx.send(Err(why.clone()));
                }
            });
        }
        Ok(Helper {
            _child: child,
            stdin: tokio::sync::Mutex::new(stdin),
            pending,
            stderr: kept,
            dead,
        })
    }

    /// Imports `dirs` into `keyspace.table`: the directories the node could not import, or
    /// why the call failed. A call still running after `timeout` stops the helper (the next
    /// import starts a new one).
    pub async fn import(
        &self,
        (keyspace, table): (&str, &str),
        options: &ImportOptions,
        dirs: &[&Path],
        timeout: Duration,
    ) -> Result<Vec<PathBuf>, String> {
        let helper = self.helper().await?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        helper
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        // Registered after the helper's end was reported: nobody would answer.
        if helper.dead.load(Ordering::Acquire) {
            helper
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            return Err(format!("the JMX importer exited: {}", said(&helper.stderr)));
        }
        let line = request(id, keyspace, table, options, dirs);
        let written = {
            let mut stdin = helper.stdin.lock().await;
            match stdin.write_all(line.as_bytes()).await {
                Ok(()) => stdin.flush().await,
                Err(e) => Err(e),
            }
        };
        if let Err(e) = written {
            helper
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            self.forget(&helper).await;
            return Err(format!(
                "the JMX importer stopped taking requests ({e}): {}",
                said(&helper.stderr)
            ));
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err("the JMX importer exited".into()),
            Err(_) => {
                self.forget(&helper).await;
                Err(format!(
                    "the import did not end within sstable_uploads.import_timeout ({}); the JMX importer was stopped",
                    humantime::format_duration(timeout)
                ))
            }
        }
    }

    /// Drops `helper` (killing it) if it is still the current one.
    async fn forget(&self, helper: &Arc<Helper>) {
        let mut slot = self.helper.lock().await;
        if slot.as_ref().is_some_and(|h| Arc::ptr_eq(h, helper)) {
            *slot = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_every_flag_and_any_path() {
        let options = ImportOptions {
            extended_verify: false,
            copy_data: true,
            ..ImportOptions::default()
        };
        let line = request(
            7,
            "ks",
            "t",
            &options,
            &[Path::new("/a\tb/c"), Path::new("/d")],
        );
        let fields: Vec<&str> = line.trim_end().split('\t').collect();
        assert_eq!(fields[0], "7");
        assert_eq!(unhex(fields[1]).unwrap(), "ks");
        assert_eq!(fields[3], "1111101");
        assert_eq!(unhex(fields[4]).unwrap(), "/a\tb/c");
        assert_eq!(unhex(fields[5]).unwrap(), "/d");
    }

    #[test]
    fn replies_are_parsed() {
        assert_eq!(parse_reply("3\tok\t").unwrap(), (3, Ok(vec![])));
        assert_eq!(
            parse_reply(&format!("4\tok\t{},{}", hex("/x"), hex("/y"))).unwrap(),
            (4, Ok(vec![PathBuf::from("/x"), PathBuf::from("/y")]))
        );
        assert_eq!(
            parse_reply(&format!("5\terr\t{}", hex("refused\n\tat x"))).unwrap(),
            (5, Err("refused at x".to_string()))
        );
        assert!(parse_reply("x\tok\t").is_none());
        assert!(parse_reply("6\terr\tzz").is_none());
    }
}
