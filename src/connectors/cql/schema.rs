//! Table schemas as the engine needs them, and the check that a target can hold what a source
//! has (after `renames`), done before anything is written.

use std::collections::HashMap;

use scylla::client::session::Session;
use scylla::cluster::metadata::{CollectionType, ColumnKind, ColumnType, NativeType};

use super::CqlError;
use crate::jobfile::Rename;

/// A column of a table.
#[derive(Debug, Clone)]
pub struct Column {
    /// Name as stored (case preserved).
    pub name: String,
    /// CQL type.
    pub typ: ColumnType<'static>,
}

impl Column {
    /// `name`, quoted for CQL.
    pub fn quoted(&self) -> String {
        quote(&self.name)
    }

    /// A column whose cells can be written one element at a time (non-frozen collection or
    /// UDT): its writetime and TTL are per element.
    pub fn is_multi_cell(&self) -> bool {
        matches!(
            self.typ,
            ColumnType::Collection { frozen: false, .. }
                | ColumnType::UserDefinedType { frozen: false, .. }
        )
    }

    /// A counter column.
    pub fn is_counter(&self) -> bool {
        matches!(self.typ, ColumnType::Native(NativeType::Counter))
    }
}

/// The columns of a table, grouped by role.
#[derive(Debug, Clone)]
pub struct TableSchema {
    /// Keyspace name as stored.
    pub keyspace: String,
    /// Table name as stored.
    pub table: String,
    /// Partition key, in order.
    pub partition_key: Vec<Column>,
    /// Clustering key, in order.
    pub clustering_key: Vec<Column>,
    /// Static columns, by name.
    pub statics: Vec<Column>,
    /// Regular columns, by name.
    pub regular: Vec<Column>,
}

impl TableSchema {
    /// `"ks"."table"`.
    pub fn qualified(&self) -> String {
        format!("{}.{}", quote(&self.keyspace), quote(&self.table))
    }

    /// Whether the table holds counters (then every regular column is a counter).
    pub fn is_counter_table(&self) -> bool {
        self.regular.iter().any(Column::is_counter)
    }

    /// Every column, primary key first.
    pub fn all(&self) -> impl Iterator<Item = &Column> {
        self.partition_key
            .iter()
            .chain(&self.clustering_key)
            .chain(&self.statics)
            .chain(&self.regular)
    }

    fn find(&self, name: &str) -> Option<(&Column, &'static str)> {
        [
            ("partition key", &self.partition_key),
            ("clustering key", &self.clustering_key),
            ("static", &self.statics),
            ("regular", &self.regular),
        ]
        .into_iter()
        .find_map(|(role, cols)| cols.iter().find(|c| c.name == name).map(|c| (c, role)))
    }
}

/// Quotes an identifier for CQL (`"`, doubled inside).
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Resolves a keyspace or table name the way CQL does: quoted names keep their case, others
/// are lower-cased.
pub fn resolve_name(name: &str) -> String {
    let n = name.trim();
    if n.len() >= 2 && n.starts_with('"') && n.ends_with('"') {
        n[1..n.len() - 1].replace("\"\"", "\"")
    } else {
        n.to_lowercase()
    }
}

/// Reads a table's schema from the session's metadata. `side` (`source`/`target`) names the
/// config keys in errors.
pub async fn load(
    session: &Session,
    side: &str,
    keyspace: &str,
    table: &str,
) -> Result<TableSchema, CqlError> {
    let ks_name = resolve_name(keyspace);
    let table_name = resolve_name(table);
    session
        .refresh_metadata()
        .await
        .map_err(|e| CqlError::Metadata {
            side: side.to_string(),
            message: e.to_string(),
        })?;
    let state = session.get_cluster_state();
    let ks = state
        .get_keyspace(&ks_name)
        .ok_or_else(|| CqlError::Invalid {
            key: format!("{side}.keyspace"),
            message: format!("keyspace {ks_name:?} does not exist on the {side} cluster"),
        })?;
    let t = ks
        .tables
        .get(&table_name)
        .ok_or_else(|| CqlError::Invalid {
            key: format!("{side}.table"),
            message: format!("table {ks_name}.{table_name} does not exist on the {side} cluster"),
        })?;
    let column = |name: &String| Column {
        name: name.clone(),
        typ: t.columns[name].typ.clone(),
    };
    let mut statics = Vec::new();
    let mut regular = Vec::new();
    let mut names: Vec<_> = t.columns.keys().collect();
    names.sort();
    for name in names {
        match t.columns[name].kind {
            ColumnKind::Static => statics.push(column(name)),
            ColumnKind::Regular => regular.push(column(name)),
            _ => {}
        }
    }
    Ok(TableSchema {
        keyspace: ks_name,
        table: table_name,
        partition_key: t.partition_key.iter().map(column).collect(),
        clustering_key: t.clustering_key.iter().map(column).collect(),
        statics,
        regular,
    })
}

/// Checks that every source column, renamed, exists in the target with the same role and a
/// type that holds the same bytes. Returns the target column name of each source column.
pub fn check_compatible(
    source: &TableSchema,
    target: &TableSchema,
    renames: &[Rename],
) -> Result<HashMap<String, String>, CqlError> {
    let invalid = |key: &str, message: String| CqlError::Invalid {
        key: key.to_string(),
        message,
    };
    for r in renames {
        if source.all().all(|c| c.name != r.from) {
            return Err(invalid(
                "renames",
                format!(
                    "column {:?} does not exist in the source table {}",
                    r.from,
                    source.qualified()
                ),
            ));
        }
    }
    let mut mapping = HashMap::new();
    for col in source.all() {
        let to = renames
            .iter()
            .find(|r| r.from == col.name)
            .map_or(col.name.as_str(), |r| r.to.as_str());
        let (_, src_role) = source.find(&col.name).expect("own column");
        let renamed = if to == col.name {
            String::new()
        } else {
            format!(" (source column {:?} after renames)", col.name)
        };
        let Some((tcol, role)) = target.find(to) else {
            return Err(invalid(
                "target.table",
                format!(
                    "the target table {} has no column {to:?}{renamed}",
                    target.qualified()
                ),
            ));
        };
        if role != src_role {
            return Err(invalid(
                "target.table",
                format!(
                    "column {to:?}{renamed} is a {src_role} column in the source but a {role} column in the target"
                ),
            ));
        }
        if !holds(&col.typ, &tcol.typ) {
            return Err(invalid(
                "target.table",
                format!(
                    "column {to:?}{renamed} has type {} in the source but {} in the target",
                    type_name(&col.typ),
                    type_name(&tcol.typ)
                ),
            ));
        }
        mapping.insert(col.name.clone(), to.to_string());
    }
    // The target's primary key must be fully given by the source, in the same order.
    let mapped = |cols: &[Column]| {
        cols.iter()
            .map(|c| mapping[&c.name].clone())
            .collect::<Vec<_>>()
    };
    let names = |cols: &[Column]| cols.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    if mapped(&source.partition_key) != names(&target.partition_key) {
        return Err(invalid(
            "target.table",
            format!(
                "partition keys differ: source ({}) after renames, target ({})",
                mapped(&source.partition_key).join(", "),
                names(&target.partition_key).join(", ")
            ),
        ));
    }
    if mapped(&source.clustering_key) != names(&target.clustering_key) {
        return Err(invalid(
            "target.table",
            format!(
                "clustering keys differ: source ({}) after renames, target ({})",
                mapped(&source.clustering_key).join(", "),
                names(&target.clustering_key).join(", ")
            ),
        ));
    }
    Ok(mapping)
}

/// Whether a column of type `target` can store the serialized values of type `source` as they
/// are. Types must match, except that UDTs may live in another keyspace and a target UDT may
/// have extra trailing fields.
pub fn holds(source: &ColumnType<'_>, target: &ColumnType<'_>) -> bool {
    use ColumnType as T;
    match (source, target) {
        (T::Native(a), T::Native(b)) => a == b,
        (T::Collection { frozen: fa, typ: a }, T::Collection { frozen: fb, typ: b }) => {
            fa == fb
                && match (a, b) {
                    (CollectionType::List(x), CollectionType::List(y))
                    | (CollectionType::Set(x), CollectionType::Set(y)) => holds(x, y),
                    (CollectionType::Map(k1, v1), CollectionType::Map(k2, v2)) => {
                        holds(k1, k2) && holds(v1, v2)
                    }
                    _ => false,
                }
        }
        (
            T::Vector {
                typ: a,
                dimensions: da,
            },
            T::Vector {
                typ: b,
                dimensions: db,
            },
        ) => da == db && holds(a, b),
        (
            T::UserDefinedType {
                frozen: fa,
                definition: a,
            },
            T::UserDefinedType {
                frozen: fb,
                definition: b,
            },
        ) => {
            fa == fb
                && a.name == b.name
                && a.field_types.len() <= b.field_types.len()
                && a.field_types
                    .iter()
                    .zip(&b.field_types)
                    .all(|((na, ta), (nb, tb))| na == nb && holds(ta, tb))
        }
        (T::Tuple(a), T::Tuple(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| holds(x, y))
        }
        _ => false,
    }
}

/// The first static or regular column of `schema` whose cells `cqlite-core` 0.18 does not
/// read or write exactly (vectors, non-frozen UDTs, static non-frozen collections), and what
/// it is.
pub fn sstable_unsupported(schema: &TableSchema) -> Option<(&Column, &'static str)> {
    schema.statics.iter().chain(&schema.regular).find_map(|c| {
        let what = match &c.typ {
            ColumnType::Vector { .. } => "vector columns",
            ColumnType::UserDefinedType { frozen: false, .. } => "non-frozen UDT columns",
            ColumnType::Collection { frozen: false, .. }
                if schema.statics.iter().any(|s| s.name == c.name) =>
            {
                "static non-frozen collections"
            }
            _ => return None,
        };
        Some((c, what))
    })
}

/// The CQL spelling of a type, for messages.
pub fn type_name(t: &ColumnType<'_>) -> String {
    use ColumnType as T;
    let frozen = |f: bool, s: String| if f { format!("frozen<{s}>") } else { s };
    match t {
        T::Native(n) => format!("{n:?}").to_lowercase(),
        T::Collection { frozen: f, typ } => frozen(
            *f,
            match typ {
                CollectionType::List(x) => format!("list<{}>", type_name(x)),
                CollectionType::Set(x) => format!("set<{}>", type_name(x)),
                CollectionType::Map(k, v) => format!("map<{}, {}>", type_name(k), type_name(v)),
                _ => "collection".to_string(),
            },
        ),
        T::Vector { typ, dimensions } => format!("vector<{}, {dimensions}>", type_name(typ)),
        T::UserDefinedType {
            frozen: f,
            definition,
        } => frozen(*f, format!("{}.{}", definition.keyspace, definition.name)),
        T::Tuple(items) => format!(
            "tuple<{}>",
            items.iter().map(type_name).collect::<Vec<_>>().join(", ")
        ),
        _ => "unknown".to_string(),
    }
}
