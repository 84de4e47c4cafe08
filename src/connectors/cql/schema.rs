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

    /// The columns of this table that `mapping` (a source's column name → this table's) maps
    /// onto, each named as the source names it, in this table's roles and order: the table a
    /// source's rows are described as to the writer.
    pub fn named_by(&self, mapping: &std::collections::HashMap<String, String>) -> TableSchema {
        let source_name: std::collections::HashMap<&str, &str> = mapping
            .iter()
            .map(|(from, to)| (to.as_str(), from.as_str()))
            .collect();
        let columns = |cols: &[Column]| -> Vec<Column> {
            cols.iter()
                .filter_map(|c| {
                    source_name.get(c.name.as_str()).map(|name| Column {
                        name: (*name).to_string(),
                        typ: c.typ.clone(),
                    })
                })
                .collect()
        };
        TableSchema {
            keyspace: self.keyspace.clone(),
            table: self.table.clone(),
            partition_key: columns(&self.partition_key),
            clustering_key: columns(&self.clustering_key),
            statics: columns(&self.statics),
            regular: columns(&self.regular),
        }
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

/// One way a target table cannot take the source's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong, naming the column or key.
    pub message: String,
    /// The statement that fixes it in place (`ALTER TABLE ... ADD ...`), when one exists; the
    /// others need the table recreated.
    pub fix: Option<String>,
}

/// The problems files have with a target table, each named once, for the first file that has
/// it (files of one export or unload share their columns): what a load of files reports in
/// its [`Mismatch`].
#[derive(Debug, Default)]
pub struct FileProblems {
    /// The problems, in the order found.
    pub list: Vec<Problem>,
    seen: std::collections::HashSet<String>,
}

impl FileProblems {
    /// Adds `problem` of `file`, with the statement that `fix`es it, unless it was added.
    pub fn add(&mut self, file: &str, problem: String, fix: Option<String>) {
        if self.seen.insert(problem.clone()) {
            self.list.push(Problem {
                message: format!("{file}: {problem}"),
                fix,
            });
        }
    }
}

/// Every way a target table cannot take the source's rows, found at once, with the CQL that
/// would fix each: an operator learns all of them from one submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The target table, quoted.
    pub target: String,
    /// What the rows come from, in words (`the source table "ks"."t"`, `the Parquet files`).
    pub source: String,
    /// The problems, in column order, then the keys.
    pub problems: Vec<Problem>,
    /// `CREATE TABLE` for a target that holds the source's columns after renames, when a
    /// problem cannot be fixed in place (a type, a role or a key differs).
    pub create: Option<String>,
}

impl Mismatch {
    /// Whether a problem needs the table recreated.
    pub fn needs_recreate(&self) -> bool {
        self.problems.iter().any(|p| p.fix.is_none())
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "the target table {} cannot take the rows of {}: {n} problem{}",
            self.target,
            self.source,
            if n == 1 { "" } else { "s" }
        )?;
        for (i, p) in self.problems.iter().enumerate() {
            write!(f, "\n  {}. {}", i + 1, p.message)?;
            match (&p.fix, &self.create) {
                (Some(fix), _) => write!(f, "; fix: {fix}")?,
                (None, Some(_)) => write!(f, "; fix: recreate the table (below)")?,
                (None, None) => write!(f, "; fix: recreate the table")?,
            }
        }
        if let Some(create) = &self.create {
            write!(
                f,
                "\nA type, a column's role or a key cannot be changed in place: recreate the target table with the source's columns (after renames). Dropping it deletes its rows:\n  DROP TABLE {};\n  {create}",
                self.target
            )?;
        }
        Ok(())
    }
}

/// Checks that every source column, renamed, exists in the target with the same role and a
/// type that holds the same bytes, and that the keys agree. Every problem is reported at once
/// ([`CqlError::Mismatch`]), each with the statement that fixes it; the `CREATE TABLE` of a
/// table to recreate is added by the caller ([`create_table`]), which can read the source's
/// clustering order. Returns the target column name of each source column.
pub fn check_compatible(
    source: &TableSchema,
    target: &TableSchema,
    renames: &[Rename],
) -> Result<HashMap<String, String>, CqlError> {
    for r in renames {
        if source.all().all(|c| c.name != r.from) {
            return Err(CqlError::Invalid {
                key: "renames".to_string(),
                message: format!(
                    "column {:?} does not exist in the source table {}",
                    r.from,
                    source.qualified()
                ),
            });
        }
    }
    let mut problems = Vec::new();
    let mut mapping = HashMap::new();
    for col in source.all() {
        let to = renamed(renames, &col.name);
        mapping.insert(col.name.clone(), to.to_string());
        let (_, src_role) = source.find(&col.name).expect("own column");
        let renamed = if to == col.name {
            String::new()
        } else {
            format!(" (source column {:?} after renames)", col.name)
        };
        let Some((tcol, role)) = target.find(to) else {
            // Regular and static columns can be added; a key column cannot.
            let fix = match src_role {
                "regular" => Some(format!(
                    "ALTER TABLE {} ADD {} {};",
                    target.qualified(),
                    quote(to),
                    ddl_type(&col.typ)
                )),
                "static" => Some(format!(
                    "ALTER TABLE {} ADD {} {} STATIC;",
                    target.qualified(),
                    quote(to),
                    ddl_type(&col.typ)
                )),
                _ => None,
            };
            problems.push(Problem {
                message: format!(
                    "the target table has no column {to:?}{renamed}, a {src_role} column of type {} in the source",
                    type_name(&col.typ)
                ),
                fix,
            });
            continue;
        };
        if role != src_role {
            problems.push(Problem {
                message: format!(
                    "column {to:?}{renamed} is a {src_role} column in the source but a {role} column in the target"
                ),
                fix: None,
            });
        } else if !holds(&col.typ, &tcol.typ) {
            problems.push(Problem {
                message: format!(
                    "column {to:?}{renamed} has type {} in the source but {} in the target",
                    type_name(&col.typ),
                    type_name(&tcol.typ)
                ),
                fix: None,
            });
        }
    }
    // The target's primary key must be fully given by the source, in the same order.
    let mapped = |cols: &[Column]| {
        cols.iter()
            .map(|c| mapping[&c.name].clone())
            .collect::<Vec<_>>()
    };
    let names = |cols: &[Column]| cols.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    for (what, src, dst) in [
        (
            "partition keys",
            &source.partition_key,
            &target.partition_key,
        ),
        (
            "clustering keys",
            &source.clustering_key,
            &target.clustering_key,
        ),
    ] {
        if mapped(src) != names(dst) {
            problems.push(Problem {
                message: format!(
                    "{what} differ: source ({}) after renames, target ({})",
                    mapped(src).join(", "),
                    names(dst).join(", ")
                ),
                fix: None,
            });
        }
    }
    if problems.is_empty() {
        return Ok(mapping);
    }
    Err(CqlError::Mismatch(Box::new(Mismatch {
        target: target.qualified(),
        source: format!("the source table {}", source.qualified()),
        problems,
        create: None,
    })))
}

/// The target name of a source column after `renames`.
fn renamed<'a>(renames: &'a [Rename], column: &'a str) -> &'a str {
    renames
        .iter()
        .find(|r| r.from == column)
        .map_or(column, |r| r.to.as_str())
}

/// `CREATE TABLE` for the table `target` (`"ks"."table"`, quoted) holding the columns of
/// `source` after `renames`, with its keys and clustering order (`descending`: per clustering
/// column, whether it is `DESC`; `None` when it could not be read).
pub fn create_table(
    target: &str,
    source: &TableSchema,
    renames: &[Rename],
    descending: Option<&[bool]>,
) -> String {
    let name = |c: &Column| quote(renamed(renames, &c.name));
    let mut columns: Vec<String> = source
        .all()
        .map(|c| {
            let is_static = source.statics.iter().any(|s| s.name == c.name);
            format!(
                "{} {}{}",
                name(c),
                ddl_type(&c.typ),
                if is_static { " STATIC" } else { "" }
            )
        })
        .collect();
    let partition: Vec<String> = source.partition_key.iter().map(name).collect();
    let clustering: Vec<String> = source.clustering_key.iter().map(name).collect();
    let mut key = format!("({})", partition.join(", "));
    for c in &clustering {
        key.push_str(", ");
        key.push_str(c);
    }
    columns.push(format!("PRIMARY KEY ({key})"));
    let mut statement = format!("CREATE TABLE {target} ({});", columns.join(", "));
    if let Some(desc) = descending
        && desc.iter().any(|d| *d)
    {
        let order: Vec<String> = clustering
            .iter()
            .zip(desc)
            .map(|(c, d)| format!("{c} {}", if *d { "DESC" } else { "ASC" }))
            .collect();
        statement.pop();
        statement.push_str(&format!(
            " WITH CLUSTERING ORDER BY ({});",
            order.join(", ")
        ));
    } else if descending.is_none() && !clustering.is_empty() {
        statement.push_str(" -- the source's clustering order could not be read: add WITH CLUSTERING ORDER BY if it has DESC columns");
    }
    statement
}

/// `CREATE TABLE` for the table `target` (`"ks"."table"`, quoted) that takes the rows of a
/// source that is not a CQL table (MySQL, Parquet): `columns` are its columns, named as in the
/// target (after renames) with the CQL type a load writes each as; `partition` and
/// `clustering` name its key columns among them, `statics` its static ones; `descending` is as
/// for [`create_table`]. `None` when a key column is not among `columns`: then no statement
/// would take the rows.
pub fn create_for(
    target: &str,
    columns: &[(String, ColumnType<'static>)],
    (partition, clustering, statics): (&[String], &[String], &[String]),
    descending: Option<&[bool]>,
) -> Option<String> {
    let column = |name: &String| {
        columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(n, t)| Column {
                name: n.clone(),
                typ: t.clone(),
            })
    };
    let keys = |names: &[String]| names.iter().map(column).collect::<Option<Vec<_>>>();
    let (partition_key, clustering_key) = (keys(partition)?, keys(clustering)?);
    if partition_key.is_empty() {
        return None;
    }
    let (mut kept_static, mut regular) = (Vec::new(), Vec::new());
    for (name, typ) in columns {
        if partition.contains(name) || clustering.contains(name) {
            continue;
        }
        let c = Column {
            name: name.clone(),
            typ: typ.clone(),
        };
        if statics.contains(name) {
            kept_static.push(c);
        } else {
            regular.push(c);
        }
    }
    let described = TableSchema {
        keyspace: String::new(),
        table: String::new(),
        partition_key,
        clustering_key,
        statics: kept_static,
        regular,
    };
    Some(create_table(target, &described, &[], descending))
}

/// The CQL spelling of a type in a statement of the target's keyspace: as [`type_name`], but
/// a UDT by its name alone (a table's UDTs live in its own keyspace).
pub fn ddl_type(t: &ColumnType<'_>) -> String {
    use ColumnType as T;
    let frozen = |f: bool, s: String| if f { format!("frozen<{s}>") } else { s };
    match t {
        T::Collection { frozen: f, typ } => frozen(
            *f,
            match typ {
                CollectionType::List(x) => format!("list<{}>", ddl_type(x)),
                CollectionType::Set(x) => format!("set<{}>", ddl_type(x)),
                CollectionType::Map(k, v) => format!("map<{}, {}>", ddl_type(k), ddl_type(v)),
                _ => "collection".to_string(),
            },
        ),
        T::Vector { typ, dimensions } => format!("vector<{}, {dimensions}>", ddl_type(typ)),
        T::UserDefinedType {
            frozen: f,
            definition,
        } => frozen(*f, quote(&definition.name)),
        T::Tuple(items) => format!(
            "tuple<{}>",
            items.iter().map(ddl_type).collect::<Vec<_>>().join(", ")
        ),
        other => type_name(other),
    }
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

/// Which clustering columns are `DESC`, from `system_schema.columns`.
pub async fn clustering_order(
    session: &Session,
    side: &str,
    schema: &TableSchema,
) -> Result<Vec<bool>, CqlError> {
    let result = session
        .query_unpaged(
            "SELECT column_name, clustering_order FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
            (&schema.keyspace, &schema.table),
        )
        .await
        .map_err(|e| CqlError::Request {
            side: side.to_string(),
            message: format!("cannot read the clustering order: {e}"),
        })?;
    let rows: Vec<(String, String)> = result
        .into_rows_result()
        .map_err(|e| CqlError::Request {
            side: side.to_string(),
            message: format!("cannot read the clustering order: {e}"),
        })?
        .rows::<(String, String)>()
        .map_err(|e| CqlError::Request {
            side: side.to_string(),
            message: format!("cannot read the clustering order: {e}"),
        })?
        .filter_map(Result::ok)
        .collect();
    Ok(schema
        .clustering_key
        .iter()
        .map(|c| {
            rows.iter()
                .any(|(name, order)| name == &c.name && order.eq_ignore_ascii_case("desc"))
        })
        .collect())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, typ: NativeType) -> Column {
        Column {
            name: name.into(),
            typ: ColumnType::Native(typ),
        }
    }

    fn table(
        name: &str,
        pk: Vec<Column>,
        ck: Vec<Column>,
        statics: Vec<Column>,
        regular: Vec<Column>,
    ) -> TableSchema {
        TableSchema {
            keyspace: "ks".into(),
            table: name.into(),
            partition_key: pk,
            clustering_key: ck,
            statics,
            regular,
        }
    }

    /// Three problems at once, each named, with the statement that fixes it; the table to
    /// recreate is the source's after renames.
    #[test]
    fn every_problem_is_named_with_its_fix() {
        use NativeType as N;
        let source = table(
            "s",
            vec![col("p", N::Int)],
            vec![col("c", N::Int)],
            vec![col("st", N::Text)],
            vec![col("v", N::Text), col("w", N::BigInt)],
        );
        let target = table(
            "t",
            vec![col("p", N::Int)],
            vec![col("c", N::Int)],
            vec![],
            vec![col("v", N::Int)],
        );
        let renames = vec![Rename {
            from: "w".into(),
            to: "w2".into(),
        }];
        let Err(CqlError::Mismatch(m)) = check_compatible(&source, &target, &renames) else {
            panic!("a mismatch");
        };
        let fixes: Vec<Option<&str>> = m.problems.iter().map(|p| p.fix.as_deref()).collect();
        assert_eq!(
            fixes,
            vec![
                Some(r#"ALTER TABLE "ks"."t" ADD "st" text STATIC;"#),
                None,
                Some(r#"ALTER TABLE "ks"."t" ADD "w2" bigint;"#),
            ],
            "{m}"
        );
        assert!(
            m.problems[1]
                .message
                .contains("type text in the source but int")
        );
        assert!(m.needs_recreate());
        assert_eq!(
            create_table(&target.qualified(), &source, &renames, Some(&[true])),
            r#"CREATE TABLE "ks"."t" ("p" int, "c" int, "st" text STATIC, "v" text, "w2" bigint, PRIMARY KEY (("p"), "c")) WITH CLUSTERING ORDER BY ("c" DESC);"#
        );
        // For a source that is not a CQL table: its columns in the types a load writes,
        // keyed as given; none without a column for a key.
        let columns = vec![
            ("p".to_string(), ColumnType::Native(N::BigInt)),
            ("v".to_string(), ColumnType::Native(N::Text)),
            ("c".to_string(), ColumnType::Native(N::Int)),
            ("st".to_string(), ColumnType::Native(N::Decimal)),
        ];
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            create_for(
                r#""ks"."t""#,
                &columns,
                (&names(&["p"]), &names(&["c"]), &names(&["st"])),
                Some(&[false]),
            )
            .as_deref(),
            Some(
                r#"CREATE TABLE "ks"."t" ("p" bigint, "c" int, "st" decimal STATIC, "v" text, PRIMARY KEY (("p"), "c"));"#
            )
        );
        assert_eq!(
            create_for(
                r#""ks"."t""#,
                &columns,
                (&names(&["p", "v"]), &[], &[]),
                None
            )
            .as_deref(),
            Some(
                r#"CREATE TABLE "ks"."t" ("p" bigint, "v" text, "c" int, "st" decimal, PRIMARY KEY (("p", "v")));"#
            )
        );
        let no_key = create_for(r#""ks"."t""#, &columns, (&names(&["id"]), &[], &[]), None);
        assert_eq!(no_key, None);
        // Keys that differ are named too, with the rest.
        let other_key = table(
            "t",
            vec![col("p", N::Int), col("c", N::Int)],
            vec![],
            vec![],
            vec![col("v", N::Text)],
        );
        let Err(CqlError::Mismatch(m)) = check_compatible(&source, &other_key, &[]) else {
            panic!("a mismatch");
        };
        let text = m.to_string();
        for part in [
            "no column \"st\"",
            "no column \"w\"",
            "\"c\" is a clustering key column in the source but a partition key",
            "partition keys differ",
            "clustering keys differ",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        assert!(
            check_compatible(&source, &source, &[]).is_ok(),
            "a table takes its own rows"
        );
    }
}
