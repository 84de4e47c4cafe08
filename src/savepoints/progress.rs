//! What a job has already done, as job files and savepoints record it: each kind of completed
//! work under its own key (`skipTokenRanges`, `skipSegments`, `skipParquetFiles`, ...).
//!
//! This module knows how work is written (the [`Shape`]s: token ranges, numbered units, named
//! units, ...), not which data system does which: a connector declares its own [`Key`]s in its
//! folder (under ScyllaDB Migrator's names where Migrator has them), and the connectors'
//! registry lists them all for the code that reads and writes whole documents. The token
//! ranges of the ring are declared here, since CQL sources, exports of CQL tables and the
//! validator share them.

use std::collections::{BTreeMap, BTreeSet};

use super::StreamPositions;
use super::ranges::{self, RangeSet};

/// How one kind of completed work is written under its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Token ranges `(start, end]`, as ScyllaDB Migrator writes `skipTokenRanges`.
    Ranges,
    /// Numbered units (`skipSegments: [0, 3]`).
    Numbers,
    /// Named units (`skipParquetFiles: [file:/a.parquet]`); `listed`: the summary line names
    /// the first few (file names), else it only counts them (long conditions, object URLs).
    Names {
        /// Whether the summary line lists names.
        listed: bool,
    },
    /// Named units with a version each (`parquetFileVersions: {file: version}`): detail of
    /// other work, never work of its own.
    Versions,
    /// A change stream's positions ([`StreamPositions`]).
    Stream,
    /// One id a run is known by (`bulkWriteRun`): recorded before any unit, never work of its
    /// own.
    Id,
}

impl Shape {
    /// Whether work of this shape is work done (which a job file may say is done), rather
    /// than a run's own record of it (an id, stream positions, versions of files), which only
    /// savepoints hold.
    pub fn is_work(self) -> bool {
        matches!(self, Shape::Ranges | Shape::Numbers | Shape::Names { .. })
    }
}

/// A key under which one kind of completed work is recorded in job files and savepoints.
#[derive(Debug, PartialEq, Eq)]
pub struct Key {
    /// The key (`skipSegments`).
    pub name: &'static str,
    /// How its value is written.
    pub shape: Shape,
    /// What the operator's log calls the work (`segments`, `Parquet files`).
    pub label: &'static str,
    /// Written even when nothing is recorded under it: ScyllaDB Migrator's keys, which its
    /// own savepoints always hold.
    pub always: bool,
}

/// The token ranges of the ring already done (ScyllaDB Migrator's key).
pub static TOKEN_RANGES: Key = Key {
    name: "skipTokenRanges",
    shape: Shape::Ranges,
    label: "token ranges",
    always: true,
};

/// The completed work of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    /// [`Shape::Ranges`].
    Ranges(RangeSet),
    /// [`Shape::Numbers`].
    Numbers(BTreeSet<u32>),
    /// [`Shape::Names`].
    Names(BTreeSet<String>),
    /// [`Shape::Versions`].
    Versions(BTreeMap<String, String>),
    /// [`Shape::Stream`].
    Stream(StreamPositions),
    /// [`Shape::Id`].
    Id(String),
}

impl Done {
    fn empty(shape: Shape) -> Self {
        match shape {
            Shape::Ranges => Done::Ranges(RangeSet::new()),
            Shape::Numbers => Done::Numbers(BTreeSet::new()),
            Shape::Names { .. } => Done::Names(BTreeSet::new()),
            Shape::Versions => Done::Versions(BTreeMap::new()),
            Shape::Stream => Done::Stream(StreamPositions::default()),
            Shape::Id => Done::Id(String::new()),
        }
    }

    fn shape_name(&self) -> &'static str {
        match self {
            Done::Ranges(_) => "ranges",
            Done::Numbers(_) => "numbers",
            Done::Names(_) => "names",
            Done::Versions(_) => "versions",
            Done::Stream(_) => "stream positions",
            Done::Id(_) => "an id",
        }
    }

    /// Whether it records nothing.
    fn is_empty(&self) -> bool {
        match self {
            Done::Ranges(r) => r.ranges().is_empty(),
            Done::Numbers(n) => n.is_empty(),
            Done::Names(n) => n.is_empty(),
            Done::Versions(v) => v.is_empty(),
            Done::Stream(_) => false,
            Done::Id(id) => id.is_empty(),
        }
    }

    /// Whether it is work done (not the detail or the name of other work).
    fn is_work(&self) -> bool {
        !matches!(self, Done::Versions(_) | Done::Id(_)) && !self.is_empty()
    }

    /// The work written as `value` under `key`; an error says what was expected (the caller
    /// names the key).
    pub fn parse(key: &Key, value: &serde_json::Value) -> Result<Self, String> {
        let label = key.label;
        fn de<T: serde::de::DeserializeOwned>(
            value: &serde_json::Value,
            expected: &str,
        ) -> Result<T, String> {
            serde_json::from_value(value.clone()).map_err(|e| format!("expected {expected}: {e}"))
        }
        Ok(match key.shape {
            Shape::Ranges => Done::Ranges(RangeSet::from_ranges(ranges::parse_skip_ranges(value)?)),
            Shape::Numbers => Done::Numbers(de(value, &format!("a list of {label} (numbers)"))?),
            Shape::Names { .. } => Done::Names(de(value, &format!("a list of {label}"))?),
            Shape::Versions => Done::Versions(de(value, &format!("a map of names to {label}"))?),
            Shape::Stream => Done::Stream(de(value, "stream positions")?),
            Shape::Id => Done::Id(
                value
                    .as_str()
                    .filter(|r| !r.is_empty() && r.len() <= 64)
                    .ok_or("expected an id of 1 to 64 characters")?
                    .to_string(),
            ),
        })
    }

    fn to_value(&self) -> serde_json::Value {
        match self {
            // Each range as recorded, not merged: ScyllaDB Migrator resumes only ranges whose
            // exact pair it finds (merged past ranges::MAX_PAIRS).
            Done::Ranges(r) => ranges::encode_skip_ranges(r.recorded()),
            Done::Numbers(n) => serde_json::to_value(n).expect("a set of numbers serializes"),
            Done::Names(n) => serde_json::to_value(n).expect("a set of names serializes"),
            Done::Versions(v) => serde_json::to_value(v).expect("a map of names serializes"),
            Done::Stream(s) => serde_json::to_value(s).expect("positions serialize"),
            Done::Id(id) => id.clone().into(),
        }
    }

    fn merge(&mut self, other: &Done) {
        match (self, other) {
            (Done::Ranges(mine), Done::Ranges(theirs)) => {
                for r in theirs.recorded() {
                    mine.insert(*r);
                }
            }
            (Done::Numbers(mine), Done::Numbers(theirs)) => mine.extend(theirs.iter().copied()),
            (Done::Names(mine), Done::Names(theirs)) => mine.extend(theirs.iter().cloned()),
            (Done::Versions(mine), Done::Versions(theirs)) => {
                mine.extend(theirs.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            (Done::Stream(mine), Done::Stream(theirs)) => mine.merge(theirs),
            // The first id a run was given stays its id.
            (Done::Id(mine), Done::Id(theirs)) if mine.is_empty() => mine.clone_from(theirs),
            _ => {}
        }
    }

    /// What `self` records that `earlier` does not; `None` when nothing (ids and versions are
    /// the detail of work and never added).
    fn added_since(&self, earlier: Option<&Done>) -> Option<Done> {
        let added = match (self, earlier) {
            (Done::Ranges(now), Some(Done::Ranges(then))) => {
                let mut added = RangeSet::new();
                for r in now.ranges() {
                    for part in then.missing(*r) {
                        added.insert(part);
                    }
                }
                Done::Ranges(added)
            }
            (Done::Numbers(now), Some(Done::Numbers(then))) => {
                Done::Numbers(now.difference(then).copied().collect())
            }
            (Done::Names(now), Some(Done::Names(then))) => {
                Done::Names(now.difference(then).cloned().collect())
            }
            (Done::Stream(now), Some(Done::Stream(then))) if now == then => return None,
            (Done::Versions(_) | Done::Id(_), _) => return None,
            (now, _) => now.clone(),
        };
        (!added.is_empty()).then_some(added)
    }
}

/// What is already done, each kind of work under its key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    done: BTreeMap<&'static str, (&'static Key, Done)>,
}

static NO_RANGES: RangeSet = RangeSet::new();
static NO_NUMBERS: BTreeSet<u32> = BTreeSet::new();
static NO_NAMES: BTreeSet<String> = BTreeSet::new();
static NO_VERSIONS: BTreeMap<String, String> = BTreeMap::new();

/// A key used with an accessor of another shape: a mistake in the code, not in any input.
fn wrong_shape(key: &Key, wanted: &str) -> ! {
    panic!(
        "savepoint key {} is declared {:?}, used as {wanted}",
        key.name, key.shape
    )
}

impl Progress {
    /// Reads the keys of `keys` from a job or savepoint document; a key absent or `null` is
    /// nothing done.
    pub fn from_document(doc: &serde_json::Value, keys: &[&'static Key]) -> Result<Self, String> {
        let mut progress = Progress::default();
        for &key in keys {
            if let Some(value) = doc.get(key.name).filter(|v| !v.is_null()) {
                let done = Done::parse(key, value).map_err(|e| format!("{}: {e}", key.name))?;
                if !done.is_empty() {
                    progress.done.insert(key.name, (key, done));
                }
            }
        }
        Ok(progress)
    }

    /// Writes the keys of `keys` into a document, replacing what was there: a key with nothing
    /// recorded is removed, or written empty when it is [`Key::always`] written.
    pub fn into_document(&self, doc: &mut serde_json::Value, keys: &[&'static Key]) {
        let Some(map) = doc.as_object_mut() else {
            return;
        };
        for &key in keys {
            match self.done.get(key.name) {
                Some((_, done)) if !done.is_empty() => {
                    map.insert(key.name.into(), done.to_value());
                }
                _ if key.always => {
                    map.insert(key.name.into(), Done::empty(key.shape).to_value());
                }
                _ => {
                    map.remove(key.name);
                }
            }
        }
        // Keys recorded by a connector the list does not name are kept all the same.
        for (name, (_, done)) in &self.done {
            if !keys.iter().any(|k| k.name == *name) {
                map.insert((*name).into(), done.to_value());
            }
        }
    }

    /// Adds everything of `other`.
    pub fn merge(&mut self, other: &Progress) {
        for (name, (key, done)) in &other.done {
            match self.done.get_mut(name) {
                Some((_, mine)) => mine.merge(done),
                None => {
                    self.done.insert(name, (key, done.clone()));
                }
            }
        }
    }

    /// Whether no work is recorded (ids and versions are not work of their own).
    pub fn is_empty(&self) -> bool {
        !self.done.values().any(|(_, done)| done.is_work())
    }

    /// What `self` records that `earlier` does not: the work finished between two savepoints
    /// of a run (`self` the later).
    pub fn added_since(&self, earlier: &Progress) -> Progress {
        let mut added = Progress::default();
        for (name, (key, done)) in &self.done {
            let then = earlier.done.get(name).map(|(_, d)| d);
            if let Some(more) = done.added_since(then) {
                added.done.insert(name, (key, more));
            }
        }
        added
    }

    /// Whether `self` records an id ([`Shape::Id`]) that `earlier` does not have.
    pub fn has_new_id_since(&self, earlier: &Progress) -> bool {
        self.done.iter().any(|(name, (_, done))| {
            matches!(done, Done::Id(_)) && earlier.done.get(name).map(|(_, d)| d) != Some(done)
        })
    }

    /// Records `done` under `key` (of `done`'s shape), replacing what was there.
    pub fn insert(&mut self, key: &'static Key, done: Done) {
        if Done::empty(key.shape).shape_name() != done.shape_name() {
            wrong_shape(key, done.shape_name());
        }
        self.done.insert(key.name, (key, done));
    }

    /// Each key's work, in the order of the keys' names.
    pub fn entries(&self) -> impl Iterator<Item = (&'static Key, &Done)> {
        self.done.values().map(|(key, done)| (*key, done))
    }

    /// The work under `key`, which the caller uses as `wanted` (checked even when absent, so
    /// that a key used with the wrong accessor fails every time, not only with work recorded).
    fn get(&self, key: &Key, wanted: &str) -> Option<&Done> {
        if Done::empty(key.shape).shape_name() != wanted {
            wrong_shape(key, wanted);
        }
        self.done.get(key.name).map(|(_, done)| done)
    }

    fn entry(&mut self, key: &'static Key, wanted: &str) -> &mut Done {
        if Done::empty(key.shape).shape_name() != wanted {
            wrong_shape(key, wanted);
        }
        &mut self
            .done
            .entry(key.name)
            .or_insert_with(|| (key, Done::empty(key.shape)))
            .1
    }

    /// The token ranges recorded under `key` ([`Shape::Ranges`]).
    pub fn ranges(&self, key: &'static Key) -> &RangeSet {
        match self.get(key, "ranges") {
            None => &NO_RANGES,
            Some(Done::Ranges(r)) => r,
            Some(_) => wrong_shape(key, "ranges"),
        }
    }

    /// The token ranges under `key`, to add to.
    pub fn ranges_mut(&mut self, key: &'static Key) -> &mut RangeSet {
        match self.entry(key, "ranges") {
            Done::Ranges(r) => r,
            _ => wrong_shape(key, "ranges"),
        }
    }

    /// The numbered units recorded under `key` ([`Shape::Numbers`]).
    pub fn numbers(&self, key: &'static Key) -> &BTreeSet<u32> {
        match self.get(key, "numbers") {
            None => &NO_NUMBERS,
            Some(Done::Numbers(n)) => n,
            Some(_) => wrong_shape(key, "numbers"),
        }
    }

    /// The numbered units under `key`, to add to.
    pub fn numbers_mut(&mut self, key: &'static Key) -> &mut BTreeSet<u32> {
        match self.entry(key, "numbers") {
            Done::Numbers(n) => n,
            _ => wrong_shape(key, "numbers"),
        }
    }

    /// The named units recorded under `key` ([`Shape::Names`]).
    pub fn names(&self, key: &'static Key) -> &BTreeSet<String> {
        match self.get(key, "names") {
            None => &NO_NAMES,
            Some(Done::Names(n)) => n,
            Some(_) => wrong_shape(key, "names"),
        }
    }

    /// The named units under `key`, to add to.
    pub fn names_mut(&mut self, key: &'static Key) -> &mut BTreeSet<String> {
        match self.entry(key, "names") {
            Done::Names(n) => n,
            _ => wrong_shape(key, "names"),
        }
    }

    /// The versions recorded under `key` ([`Shape::Versions`]).
    pub fn versions(&self, key: &'static Key) -> &BTreeMap<String, String> {
        match self.get(key, "versions") {
            None => &NO_VERSIONS,
            Some(Done::Versions(v)) => v,
            Some(_) => wrong_shape(key, "versions"),
        }
    }

    /// The versions under `key`, to add to.
    pub fn versions_mut(&mut self, key: &'static Key) -> &mut BTreeMap<String, String> {
        match self.entry(key, "versions") {
            Done::Versions(v) => v,
            _ => wrong_shape(key, "versions"),
        }
    }

    /// The stream positions recorded under `key` ([`Shape::Stream`]).
    pub fn stream(&self, key: &'static Key) -> Option<&StreamPositions> {
        match self.get(key, "stream positions") {
            None => None,
            Some(Done::Stream(s)) => Some(s),
            Some(_) => wrong_shape(key, "stream positions"),
        }
    }

    /// The stream positions under `key`, to move; `None` when none are recorded.
    pub fn stream_mut(&mut self, key: &'static Key) -> Option<&mut StreamPositions> {
        if key.shape != Shape::Stream {
            wrong_shape(key, "stream positions");
        }
        match self.done.get_mut(key.name).map(|(_, done)| done) {
            None => None,
            Some(Done::Stream(s)) => Some(s),
            Some(_) => wrong_shape(key, "stream positions"),
        }
    }

    /// Records `positions` under `key`, replacing what was there.
    pub fn set_stream(&mut self, key: &'static Key, positions: StreamPositions) {
        if key.shape != Shape::Stream {
            wrong_shape(key, "stream positions");
        }
        self.done.insert(key.name, (key, Done::Stream(positions)));
    }

    /// The id recorded under `key` ([`Shape::Id`]).
    pub fn id(&self, key: &'static Key) -> Option<&str> {
        match self.get(key, "an id") {
            None => None,
            Some(Done::Id(id)) => Some(id),
            Some(_) => wrong_shape(key, "an id"),
        }
    }

    /// The id under `key`, `new` recorded first when there is none.
    pub fn id_or_insert_with(&mut self, key: &'static Key, new: impl FnOnce() -> String) -> String {
        match self.entry(key, "an id") {
            Done::Id(id) => {
                if id.is_empty() {
                    *id = new();
                }
                id.clone()
            }
            _ => wrong_shape(key, "an id"),
        }
    }
}
