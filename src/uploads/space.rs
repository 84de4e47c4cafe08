//! The free-space floor of the staging file system (`sstable_uploads.min_free_space_percent`),
//! held while uploads write, not only when they start: every upload in flight reserves the
//! bytes it has yet to write, and no upload may write a byte unless the free space, less every
//! reservation, stays above the floor. Checked once at the start only, three concurrent 62 MB
//! uploads took a disk from above a 10 % floor to 11.5 %, the next one to 2.7 %, and four of
//! 60 MB filled it (every one of them then failed on `No space left on device`).
//!
//! An upload that declares its length (`Content-Length`) reserves all of it before its first
//! byte is read, so an upload that cannot fit is refused before it writes anything; one that
//! does not declare it reserves each chunk before writing it. Either way the free space is
//! read again (`statvfs`) before every chunk, since the node and its compactions use the same
//! disk.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::UploadError;

/// Blocks reserved above an upload's bytes: the partial last block of its file and the
/// directories created for it (upload, keyspace, table) take whole blocks of their own.
const SLACK_BLOCKS: u64 = 4;

/// The reservations of the uploads in flight, against one staging file system.
pub struct Space {
    dir: PathBuf,
    min_percent: f64,
    /// Bytes reserved and not yet written, over every upload in flight. Read and changed with
    /// the file system's free space read under the same lock, so two uploads never both take
    /// the last room.
    reserved: Arc<Mutex<u64>>,
}

/// One upload's reservation; what is left of it is given back when it is dropped (the upload
/// ended, failed or was abandoned by its client).
pub struct Reservation {
    space: Arc<Mutex<u64>>,
    dir: PathBuf,
    min_percent: f64,
    component: String,
    /// Bytes reserved for this upload, slack included; grows for an upload of unknown length.
    reserved: u64,
    /// The part of `reserved` the file system's free space shows as used by now (whole blocks
    /// of the bytes known written), so no longer counted in [`Space::reserved`].
    used: u64,
    block: u64,
}

/// The staging file system now, in bytes.
struct Stat {
    available: u64,
    total: u64,
    block: u64,
}

fn stat(dir: &Path) -> Result<Stat, UploadError> {
    let s = rustix::fs::statvfs(dir).map_err(|e| UploadError::Io {
        path: dir.to_path_buf(),
        source: e.into(),
    })?;
    let block = s.f_frsize.max(1);
    Ok(Stat {
        available: s.f_bavail.saturating_mul(block),
        total: s.f_blocks.saturating_mul(block),
        block,
    })
}

fn round_up(n: u64, block: u64) -> u64 {
    n.div_ceil(block).saturating_mul(block)
}

impl Space {
    /// The floor `min_percent` of the file system of `dir`.
    pub fn new(dir: PathBuf, min_percent: f64) -> Self {
        Self {
            dir,
            min_percent,
            reserved: Arc::new(Mutex::new(0)),
        }
    }

    /// Reserves room for `component`, of `declared` bytes if known (else nothing yet: it
    /// reserves as it writes), or refuses it if the floor would be crossed.
    pub fn reserve(
        &self,
        component: &str,
        declared: Option<u64>,
    ) -> Result<Reservation, UploadError> {
        let mut reservation = Reservation {
            space: self.reserved.clone(),
            dir: self.dir.clone(),
            min_percent: self.min_percent,
            component: component.to_string(),
            reserved: 0,
            used: 0,
            block: 1,
        };
        reservation.grow_to(declared.unwrap_or(0), 0)?;
        Ok(reservation)
    }
}

impl Reservation {
    /// Before writing the bytes up to `end` of the file (`written` of them known on disk):
    /// reserves what they need beyond this upload's reservation and checks the floor again.
    /// Refused with [`UploadError::NoSpace`].
    pub fn before_write(&mut self, end: u64, written: u64) -> Result<(), UploadError> {
        self.grow_to(end, written)
    }

    fn grow_to(&mut self, end: u64, written: u64) -> Result<(), UploadError> {
        let mut total_reserved = self.space.lock().unwrap_or_else(|p| p.into_inner());
        let now = stat(&self.dir)?;
        if now.total == 0 {
            // A file system that reports no size (some network ones): nothing to hold.
            return Ok(());
        }
        self.block = now.block;
        // What is written shows in the free space already: it leaves the reservations.
        let used = round_up(written, now.block).min(self.reserved);
        *total_reserved = total_reserved.saturating_sub(used.saturating_sub(self.used));
        self.used = used;
        let want = (round_up(end, now.block) + SLACK_BLOCKS * now.block).max(self.reserved);
        let more = want - self.reserved;
        let floor = (now.total as f64 * self.min_percent / 100.0).ceil() as u64;
        let left = now
            .available
            .saturating_sub(*total_reserved)
            .saturating_sub(more);
        if left < floor {
            return Err(UploadError::NoSpace {
                dir: self.dir.clone(),
                component: self.component.clone(),
                needed: end.saturating_sub(written),
                available: now.available,
                reserved: total_reserved.saturating_sub(self.reserved - self.used),
                total: now.total,
                min: self.min_percent,
                floor,
            });
        }
        *total_reserved += more;
        self.reserved = want;
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut total = self.space.lock().unwrap_or_else(|p| p.into_inner());
        *total = total.saturating_sub(self.reserved - self.used);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_together_never_cross_the_floor() {
        let dir = tempfile::tempdir().unwrap();
        let s = stat(dir.path()).unwrap();
        // A floor that leaves 100 MiB above it: room for two uploads of 40 MiB, not three (with
        // 20 MiB to spare either way, for whatever else writes to this disk meanwhile).
        let room = 100 << 20;
        let min = (s.available - room) as f64 * 100.0 / s.total as f64;
        let space = Space::new(dir.path().to_path_buf(), min);
        let a = space.reserve("a", Some(40 << 20)).unwrap();
        let b = space.reserve("b", Some(40 << 20)).unwrap();
        let err = match space.reserve("c", Some(40 << 20)) {
            Err(e) => e,
            Ok(_) => panic!("a third 40 MiB upload fits in 100 MiB"),
        };
        assert!(matches!(err, UploadError::NoSpace { .. }), "{err}");
        drop(a);
        let mut c = space.reserve("c", None).unwrap();
        c.before_write(40 << 20, 0).unwrap();
        assert!(c.before_write(80 << 20, 0).is_err(), "beyond what b leaves");
        drop((b, c));
        assert_eq!(*space.reserved.lock().unwrap(), 0);
    }
}
