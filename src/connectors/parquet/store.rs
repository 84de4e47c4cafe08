//! Where Parquet files live: the local disk or an S3 bucket, both through `object_store`, and
//! the names a file is recorded under in `skipParquetFiles` (Hadoop's: `file:/abs/path`,
//! `s3a://bucket/key`), so that savepoints read the same in ScyllaDB Migrator and drover.

use std::sync::Arc;

use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};

use super::ParquetError;
use super::config::{Location, S3Access};

/// An opened location.
#[derive(Clone)]
pub struct Store {
    /// The object store holding the files.
    pub inner: Arc<dyn ObjectStore>,
    /// What the job named.
    pub location: Location,
    /// The location inside the store (an absolute local path without its leading `/`, or an
    /// S3 key prefix).
    pub root: ObjPath,
    /// For a local location: its absolute path.
    pub local_root: Option<std::path::PathBuf>,
    /// `source` or `target`, for messages.
    pub side: &'static str,
}

/// One Parquet file found at a location.
#[derive(Debug, Clone)]
pub struct FileEntry {
    /// The name recorded in `skipParquetFiles` (`file:/abs/path`, `s3a://bucket/key`).
    pub id: String,
    /// The object's path in its store.
    pub path: ObjPath,
    /// Size in bytes.
    pub size: u64,
    /// What changes when the file does: size, modification time and ETag.
    pub version: String,
}

impl Store {
    /// Opens `location` for `side`. A local location is made absolute (it need not exist yet
    /// for a target); nothing is read from S3 until the store is used.
    pub fn open(
        side: &'static str,
        location: &Location,
        s3: &S3Access,
    ) -> Result<Self, ParquetError> {
        let invalid = |message: String| ParquetError::Invalid {
            key: format!("{side}.path"),
            message,
        };
        match location {
            Location::Local(p) => {
                let abs =
                    std::path::absolute(p).map_err(|e| invalid(format!("{}: {e}", p.display())))?;
                let root = ObjPath::from_absolute_path(&abs)
                    .map_err(|e| invalid(format!("{}: {e}", abs.display())))?;
                Ok(Self {
                    inner: Arc::new(LocalFileSystem::new()),
                    location: location.clone(),
                    root,
                    local_root: Some(abs),
                    side,
                })
            }
            Location::S3 { bucket, prefix, .. } => {
                let inner = crate::s3::client(
                    bucket,
                    s3.region.as_deref(),
                    s3.endpoint.as_ref().map(|e| e.url()).as_deref(),
                    s3.credentials.as_ref().map(|c| c.keys()),
                )
                .map_err(|e| ParquetError::Invalid {
                    key: side.to_string(),
                    message: format!("cannot use S3 bucket {bucket:?}: {e}"),
                })?;
                Ok(Self {
                    inner: Arc::new(inner),
                    location: location.clone(),
                    root: ObjPath::from(prefix.as_str()),
                    local_root: None,
                    side,
                })
            }
        }
    }

    /// The name `path` is recorded under.
    pub fn id_of(&self, path: &ObjPath) -> String {
        match &self.location {
            Location::Local(_) => format!("file:/{path}"),
            Location::S3 { scheme, bucket, .. } => format!("{scheme}://{bucket}/{path}"),
        }
    }

    /// Uploads the local `file` to `to` as one multipart upload of `part_bytes` parts: the
    /// object appears whole, when the upload completes, or not at all. The error says what
    /// failed, without the object's name.
    pub async fn upload(
        &self,
        file: &std::path::Path,
        to: &ObjPath,
        part_bytes: usize,
    ) -> Result<(), String> {
        use tokio::io::AsyncReadExt;
        let upload = self
            .inner
            .put_multipart(to)
            .await
            .map_err(|e| e.to_string())?;
        let mut write = object_store::WriteMultipart::new_with_chunk_size(upload, part_bytes);
        let mut f = tokio::fs::File::open(file)
            .await
            .map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; part_bytes];
        loop {
            write
                .wait_for_capacity(2)
                .await
                .map_err(|e| e.to_string())?;
            let n = f.read(&mut buf).await.map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            write.write(&buf[..n]);
        }
        write.finish().await.map_err(|e| e.to_string())?;
        Ok(())
    }

    /// The local file of `path` (local locations only).
    pub fn local_path(&self, path: &ObjPath) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/{path}"))
    }

    fn store_error(&self, what: &str, e: object_store::Error) -> ParquetError {
        let message = match &e {
            object_store::Error::NotFound { .. } => format!("{what}: not found"),
            _ => format!("{what}: {}", crate::answer::shown_urls_in(&e.to_string())),
        };
        ParquetError::Store {
            side: self.side,
            message,
        }
    }

    /// Every object below the location (the location itself when it is one object).
    pub async fn list_all(&self) -> Result<Vec<ObjectMeta>, ParquetError> {
        if let Some(abs) = &self.local_root {
            match std::fs::metadata(abs) {
                Ok(m) if m.is_file() => {
                    return Ok(vec![
                        self.inner
                            .head(&self.root)
                            .await
                            .map_err(|e| self.store_error(&abs.display().to_string(), e))?,
                    ]);
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => {
                    return Err(ParquetError::Store {
                        side: self.side,
                        message: format!("{}: {e}", abs.display()),
                    });
                }
            }
        } else if !self.root.as_ref().is_empty()
            && let Ok(meta) = self.inner.head(&self.root).await
        {
            return Ok(vec![meta]);
        }
        let prefix = (!self.root.as_ref().is_empty()).then_some(&self.root);
        let mut all: Vec<ObjectMeta> = self
            .inner
            .list(prefix)
            .try_collect()
            .await
            .map_err(|e| self.store_error(&self.location.to_string(), e))?;
        all.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(all)
    }

    /// The Parquet files of a source location: the file it names, or every `*.parquet` below
    /// it, leaving out hidden names (`_…`, `.…`: Spark's markers and temporary files).
    pub async fn parquet_files(&self) -> Result<Vec<FileEntry>, ParquetError> {
        let all = self.list_all().await?;
        let single = all.len() == 1 && all[0].location == self.root;
        let files: Vec<FileEntry> = all
            .into_iter()
            .filter(|m| single || is_data_file(&m.location))
            .map(|m| FileEntry {
                id: self.id_of(&m.location),
                version: format!(
                    "size={};mtime={};etag={}",
                    m.size,
                    m.last_modified.timestamp_millis(),
                    m.e_tag.as_deref().unwrap_or("")
                ),
                path: m.location,
                size: m.size,
            })
            .collect();
        Ok(files)
    }
}

/// A `*.parquet` file that is not hidden (no part of its name below the root starts with `_`
/// or `.`).
pub fn is_data_file(path: &ObjPath) -> bool {
    let name = path.filename().unwrap_or("");
    name.ends_with(".parquet") && !name.starts_with('_') && !name.starts_with('.')
}

/// A `skipParquetFiles` entry in one spelling for comparisons: `file:/x` for local files
/// (however many slashes, or a bare absolute path), `s3://bucket/key` for S3 (`s3a`, `s3n`
/// are the same objects).
pub fn normalize_id(id: &str) -> String {
    let id = id.trim();
    if let Some(rest) = id.strip_prefix("file:") {
        return format!("file:/{}", rest.trim_start_matches('/'));
    }
    if id.starts_with('/') {
        return format!("file:/{}", id.trim_start_matches('/'));
    }
    for scheme in ["s3a://", "s3n://", "s3://"] {
        if let Some(rest) = id.strip_prefix(scheme) {
            return format!("s3://{rest}");
        }
    }
    id.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_names_compare_in_one_spelling() {
        assert_eq!(normalize_id("file:///a/b.parquet"), "file:/a/b.parquet");
        assert_eq!(normalize_id("file:/a/b.parquet"), "file:/a/b.parquet");
        assert_eq!(normalize_id("/a/b.parquet"), "file:/a/b.parquet");
        assert_eq!(normalize_id("s3a://b/k.parquet"), "s3://b/k.parquet");
        assert_eq!(normalize_id("s3://b/k.parquet"), "s3://b/k.parquet");
    }

    #[test]
    fn hidden_and_other_files_are_not_data() {
        assert!(is_data_file(&ObjPath::from("a/part-0.parquet")));
        assert!(!is_data_file(&ObjPath::from("a/_SUCCESS")));
        assert!(!is_data_file(&ObjPath::from("a/.part-0.parquet.tmp")));
        assert!(!is_data_file(&ObjPath::from("a/notes.txt")));
    }
}

/// Reads one Parquet file of a store for the async Arrow reader: byte ranges by `GET` with a
/// `Range`, the footer from the known file size (one request, no listing).
#[derive(Clone, Debug)]
pub struct FileReader {
    store: Arc<dyn ObjectStore>,
    path: ObjPath,
    size: u64,
}

impl FileReader {
    /// A reader of `path`, `size` bytes long, in `store`.
    pub fn new(store: Arc<dyn ObjectStore>, path: ObjPath, size: u64) -> Self {
        Self { store, path, size }
    }
}

fn external(e: object_store::Error) -> parquet::errors::ParquetError {
    parquet::errors::ParquetError::External(Box::new(e))
}

impl parquet::arrow::async_reader::AsyncFileReader for FileReader {
    fn get_bytes(
        &mut self,
        range: std::ops::Range<u64>,
    ) -> futures::future::BoxFuture<'_, parquet::errors::Result<bytes::Bytes>> {
        Box::pin(async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(external)
        })
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> futures::future::BoxFuture<'_, parquet::errors::Result<Vec<bytes::Bytes>>> {
        Box::pin(async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(external)
        })
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a parquet::arrow::arrow_reader::ArrowReaderOptions>,
    ) -> futures::future::BoxFuture<
        'a,
        parquet::errors::Result<Arc<parquet::file::metadata::ParquetMetaData>>,
    > {
        Box::pin(async move {
            let size = self.size;
            let metadata = parquet::file::metadata::ParquetMetaDataReader::new()
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(metadata))
        })
    }
}
