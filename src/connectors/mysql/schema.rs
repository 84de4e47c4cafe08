//! A MySQL table as `information_schema` describes it: its columns, their types, and its
//! primary key.

use mysql_async::prelude::Queryable;

use super::{MysqlError, MysqlSource};

/// One column of the source table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceColumn {
    /// Name as stored.
    pub name: String,
    /// `DATA_TYPE`, lower case (`int`, `varchar`, `datetime`, ...).
    pub data_type: String,
    /// `COLUMN_TYPE`, lower case (`int(10) unsigned`, `enum('a','b')`, `bit(1)`, ...).
    pub column_type: String,
    /// `NUMERIC_SCALE` (DECIMAL), `DATETIME_PRECISION` (fractional seconds digits).
    pub scale: Option<u64>,
    /// Digits of fractional seconds (DATETIME, TIMESTAMP, TIME).
    pub fractional_digits: Option<u64>,
    /// Whether it is computed by the server (`GENERATED ALWAYS AS`).
    pub generated: bool,
}

impl SourceColumn {
    /// Whether it holds whole numbers.
    pub fn is_integer(&self) -> bool {
        matches!(
            self.data_type.as_str(),
            "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint"
        )
    }

    /// Whether it is an unsigned integer.
    pub fn unsigned(&self) -> bool {
        self.column_type.contains("unsigned")
    }

    /// `bit(1)` and `tinyint(1)`: MySQL's booleans.
    pub fn is_flag(&self) -> bool {
        self.column_type == "bit(1)" || self.column_type.starts_with("tinyint(1)")
    }

    /// Whether it holds bytes rather than characters.
    pub fn is_binary(&self) -> bool {
        matches!(
            self.data_type.as_str(),
            "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob"
        )
    }
}

/// The source table.
#[derive(Debug, Clone)]
pub struct SourceTable {
    /// `database`.`table`, for messages.
    pub name: String,
    /// Columns in table order.
    pub columns: Vec<SourceColumn>,
    /// Primary key columns in key order (empty: the table has none).
    pub primary_key: Vec<String>,
    /// The server's estimate of its rows.
    pub estimated_rows: u64,
}

impl SourceTable {
    /// A column by name (MySQL column names are case-insensitive).
    pub fn column(&self, name: &str) -> Option<&SourceColumn> {
        self.columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
    }
}

type ColumnRow = (
    String,
    String,
    String,
    Option<u64>,
    Option<u64>,
    Option<String>,
);

/// Reads the table's description; a missing table is an error naming it.
pub async fn load(
    conn: &mut mysql_async::Conn,
    src: &MysqlSource,
) -> Result<SourceTable, MysqlError> {
    let name = format!("{}.{}", src.database, src.table);
    let rows: Vec<ColumnRow> = conn
        .exec(
            "SELECT COLUMN_NAME, LOWER(DATA_TYPE), LOWER(COLUMN_TYPE), NUMERIC_SCALE, \
             DATETIME_PRECISION, EXTRA FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
            (&src.database, &src.table),
        )
        .await
        .map_err(|e| MysqlError::query(format!("reading the columns of {name}"), e))?;
    if rows.is_empty() {
        return Err(MysqlError::Invalid {
            key: "source.table".into(),
            message: format!(
                "table {name} does not exist on {}:{} (or the user {:?} cannot see it)",
                src.host, src.port, src.credentials.username
            ),
        });
    }
    let columns = rows
        .into_iter()
        .map(
            |(name, data_type, column_type, scale, fsp, extra)| SourceColumn {
                generated: extra
                    .as_deref()
                    .is_some_and(|e| e.to_ascii_lowercase().contains("generated")),
                name,
                data_type,
                column_type,
                scale,
                fractional_digits: fsp,
            },
        )
        .collect();
    let primary_key: Vec<String> = conn
        .exec(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY' \
             ORDER BY ORDINAL_POSITION",
            (&src.database, &src.table),
        )
        .await
        .map_err(|e| MysqlError::query(format!("reading the primary key of {name}"), e))?;
    let estimated_rows: Option<Option<u64>> = conn
        .exec_first(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (&src.database, &src.table),
        )
        .await
        .map_err(|e| MysqlError::query(format!("reading the size of {name}"), e))?;
    Ok(SourceTable {
        name,
        columns,
        primary_key,
        estimated_rows: estimated_rows.flatten().unwrap_or(0),
    })
}
