//! MySQL and MariaDB tables as a source (`type: mysql`), copied to CQL.
//!
//! The table is read in *ranges*: `partitionColumn` split into `numPartitions` strides as
//! Spark's JDBC reader splits it (the first range also takes NULLs and values below
//! `lowerBound`, the last everything from its start up), or, without a partition column, the
//! table's integer primary key split into ranges of equal width, or else the whole table as
//! one range. Each range is one `SELECT`, whose rows are streamed from the server (never
//! buffered whole) page by page into the CQL writer; a range is recorded complete in the
//! savepoints (`skipMySqlRanges`, by its condition) once every write of it was acknowledged,
//! so a resumed run skips it.
//!
//! Values are read with the binary protocol (exact floats, dates, times) on a session in
//! UTC and utf8mb4, and converted to the target column's CQL type by [`convert`]; a pair of
//! types that cannot be converted exactly is refused before anything is written, naming the
//! column, and a value that cannot be (an unsigned BIGINT beyond a CQL `bigint`, a zero date
//! with `zeroDateTimeBehavior: EXCEPTION`) fails the job naming the column and the row's key.

mod connector;
pub mod compare;
pub mod config;
pub mod convert;
pub mod scan;
pub mod schema;
pub mod units;

pub use connector::Mysql;
pub use config::MysqlSource;

use mysql_async::prelude::Queryable;
use secrecy::ExposeSecret;

use crate::connectors::seam::{RequestError, Retry};

/// drover: the ranges of a MySQL table already copied, each as the condition that selects it
/// (ScyllaDB Migrator keeps no progress for MySQL).
pub static RANGES: crate::savepoints::Key = crate::savepoints::Key {
    name: "skipMySqlRanges",
    shape: crate::savepoints::Shape::Names { listed: false },
    label: "MySQL ranges",
    always: false,
};

/// Errors of the MySQL connector.
#[derive(Debug, thiserror::Error)]
pub enum MysqlError {
    /// The job cannot run as written: a missing table or column, a type that cannot be
    /// converted. Found before anything is written.
    #[error("{key}: {message}")]
    Invalid {
        /// The job config key concerned.
        key: String,
        /// What is wrong, naming the table and column.
        message: String,
    },
    /// The target table cannot take the source's rows: every problem, each with the CQL that
    /// fixes it where one does.
    #[error("target.table: {0}")]
    Mismatch(Box<crate::connectors::cql::schema::Mismatch>),
    /// The server could not be reached or refused the connection.
    #[error("source: cannot connect to MySQL at {address}: {message}")]
    Connect {
        /// `host:port`.
        address: String,
        /// Why.
        message: String,
    },
    /// A query failed.
    #[error("source: {what}: {message}")]
    Query {
        /// What was being read.
        what: String,
        /// The server's or the connection's error.
        message: String,
        /// Whether reading again can help (a lost connection) or not (a refused query).
        retry: Retry,
    },
    /// A value cannot be written to its target column: the column and the row's key are
    /// named.
    #[error("source: {range}: {message}")]
    Value {
        /// The range being read.
        range: String,
        /// The column, the row's key and what is wrong.
        message: String,
    },
}

impl crate::connectors::seam::ConnectorError for MysqlError {
    fn is_config_problem(&self) -> bool {
        matches!(self, Self::Invalid { .. } | Self::Mismatch(_))
    }

    fn is_schema_mismatch(&self) -> bool {
        matches!(self, Self::Mismatch(_))
    }
}

impl RequestError for MysqlError {
    fn retry(&self) -> Retry {
        match self {
            Self::Query { retry, .. } => *retry,
            _ => Retry::Never,
        }
    }
}

impl MysqlError {
    /// A failed query, classified: server errors about the statement are final, a lost or
    /// timed-out connection may go away.
    pub fn query(what: impl Into<String>, e: mysql_async::Error) -> Self {
        let retry = match &e {
            mysql_async::Error::Server(s) => match s.code {
                // Lock wait timeout, deadlock, too many connections, server shutting down,
                // query interrupted: worth another try.
                1205 | 1213 | 1040 | 1053 | 1317 | 2013 | 2006 => Retry::Safe,
                _ => Retry::Never,
            },
            mysql_async::Error::Io(_) | mysql_async::Error::Driver(_) => Retry::Safe,
            _ => Retry::Never,
        };
        Self::Query {
            what: what.into(),
            message: e.to_string(),
            retry,
        }
    }
}

/// Connection options of a source: the session is set to UTC and utf8mb4 on every
/// connection (TIMESTAMP values are then read as UTC, text as UTF-8 whatever the column's
/// character set), with long write timeouts so a stream the target slows down is not cut.
pub fn options(src: &MysqlSource) -> Result<mysql_async::Opts, MysqlError> {
    let mut b = mysql_async::OptsBuilder::default()
        .ip_or_hostname(src.host.clone())
        .tcp_port(src.port)
        .user(Some(src.credentials.username.clone()))
        .pass(Some(src.credentials.password.expose_secret().to_string()))
        .db_name(Some(src.database.clone()))
        .prefer_socket(false)
        .max_allowed_packet(Some(src.max_allowed_packet as usize))
        .wait_timeout(Some(28_800))
        .stmt_cache_size(Some(16))
        .setup(vec![
            "SET time_zone = '+00:00'".to_string(),
            "SET NAMES utf8mb4".to_string(),
            // The server gives up on a client that does not read for net_write_timeout
            // seconds; drover stops reading while the target is slow.
            format!(
                "SET SESSION net_write_timeout = {}, net_read_timeout = {}",
                (src.socket_timeout_ms / 1000).max(60),
                (src.socket_timeout_ms / 1000).max(60)
            ),
        ])
        .pool_opts(
            mysql_async::PoolOpts::default()
                // A connection per range read at once, plus a validation's lookups by key
                // (a few per range) and the planning connection.
                .with_constraints(
                    mysql_async::PoolConstraints::new(0, src.ranges_at_once.max(1) * 5 + 1)
                        .expect("0 <= max"),
                )
                .with_inactive_connection_ttl(std::time::Duration::from_secs(60)),
        );
    if src.tls.enabled {
        let mut ssl = mysql_async::SslOpts::default()
            .with_danger_accept_invalid_certs(!src.tls.verify)
            .with_danger_skip_domain_validation(!src.tls.verify_identity);
        if let Some(ca) = &src.tls.ca {
            ssl = ssl.with_root_certs(vec![std::path::PathBuf::from(ca).into()]);
        }
        if let Some((cert, key)) = &src.tls.client {
            ssl = ssl.with_client_identity(Some(mysql_async::ClientIdentity::new(
                std::path::PathBuf::from(cert).into(),
                std::path::PathBuf::from(key).into(),
            )));
        }
        b = b.ssl_opts(Some(ssl));
    }
    Ok(b.into())
}

/// A connection the server refused for who asked: wrong credentials, or a user without
/// access to the database. A configuration fault, not an outage: it is the job file's to fix
/// (an `Invalid` naming the key, answered 400), and asking again cannot help, so it is never
/// retried — where an unreachable server is a 502 that may pass.
fn refused(e: &mysql_async::Error, src: &MysqlSource, address: &str) -> Option<MysqlError> {
    let mysql_async::Error::Server(s) = e else {
        return None;
    };
    let user = &src.credentials.username;
    let (key, why) = match s.code {
        // ER_ACCESS_DENIED_ERROR, ER_ACCESS_DENIED_NO_PASSWORD_ERROR: the password or user.
        1045 | 1698 => (
            "source.credentials",
            format!("the server at {address} refused the credentials of user {user:?}"),
        ),
        // ER_DBACCESS_DENIED_ERROR: the user exists, without a grant on the database.
        1044 => (
            "source.database",
            format!(
                "the server at {address} refused user {user:?} access to database {:?}",
                src.database
            ),
        ),
        _ => return None,
    };
    Some(MysqlError::Invalid {
        key: key.into(),
        message: format!("{why} (MySQL error {}: {})", s.code, s.message),
    })
}

/// Opens a connection, bounded by `connectTimeout`.
pub async fn connect(
    pool: &mysql_async::Pool,
    src: &MysqlSource,
) -> Result<mysql_async::Conn, MysqlError> {
    let address = format!("{}:{}", src.host, src.port);
    let wait = std::time::Duration::from_millis(src.connect_timeout_ms.max(1));
    match tokio::time::timeout(wait, pool.get_conn()).await {
        Ok(Ok(mut conn)) => {
            // Reading is all drover does: a connection that cannot write cannot harm.
            let _ = conn.query_drop("SET SESSION TRANSACTION READ ONLY").await;
            Ok(conn)
        }
        Ok(Err(e)) => Err(refused(&e, src, &address).unwrap_or(MysqlError::Connect {
            address,
            message: e.to_string(),
        })),
        Err(_) => Err(MysqlError::Connect {
            address,
            message: format!(
                "no connection within connectTimeout ({} ms)",
                src.connect_timeout_ms
            ),
        }),
    }
}
