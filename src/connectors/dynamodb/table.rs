//! Table descriptions: the source's read once, the target created from it when missing (key
//! schema, attribute definitions, secondary indexes, billing mode and TTL), or checked against
//! it when present.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    LocalSecondaryIndex, ProvisionedThroughput, ScalarAttributeType, TableDescription, TableStatus,
    TimeToLiveSpecification, TimeToLiveStatus,
};

use super::config::{self, Connection};
use super::retry::DynamoError;

/// How long a created table may take to become `ACTIVE`.
const CREATE_TIMEOUT: Duration = Duration::from_secs(300);

/// What drover needs to know of a table.
#[derive(Debug, Clone)]
pub struct Described {
    /// The server's description.
    pub table: TableDescription,
    /// The TTL attribute, when TTL is enabled (or being enabled).
    pub ttl_attribute: Option<String>,
}

impl Described {
    /// Key attributes with their types, hash key first.
    pub fn key(&self) -> Vec<(String, KeyType, Option<ScalarAttributeType>)> {
        key_of(&self.table)
    }

    /// Names of the key attributes, hash key first.
    pub fn key_names(&self) -> Vec<String> {
        self.key().into_iter().map(|(n, _, _)| n).collect()
    }

    /// Provisioned (read, write) capacity units, for a provisioned table.
    pub fn provisioned(&self) -> Option<(i64, i64)> {
        if self.billing_mode() == BillingMode::PayPerRequest {
            return None;
        }
        let p = self.table.provisioned_throughput()?;
        Some((p.read_capacity_units()?, p.write_capacity_units()?))
    }

    /// The table's billing mode (tables created before on-demand existed report none:
    /// provisioned).
    pub fn billing_mode(&self) -> BillingMode {
        self.table
            .billing_mode_summary()
            .and_then(|b| b.billing_mode())
            .cloned()
            .unwrap_or(BillingMode::Provisioned)
    }
}

fn key_of(t: &TableDescription) -> Vec<(String, KeyType, Option<ScalarAttributeType>)> {
    let mut key: Vec<_> = t
        .key_schema()
        .iter()
        .map(|k| {
            let ty = t
                .attribute_definitions()
                .iter()
                .find(|a| a.attribute_name() == k.attribute_name())
                .map(|a| a.attribute_type().clone());
            (k.attribute_name().to_string(), k.key_type().clone(), ty)
        })
        .collect();
    key.sort_by_key(|(_, kt, _)| *kt != KeyType::Hash);
    key
}

/// Describes a table; `Ok(None)` when it does not exist.
pub async fn describe(client: &Client, c: &Connection) -> Result<Option<Described>, DynamoError> {
    let out = match client.describe_table().table_name(&c.table).send().await {
        Ok(out) => out,
        Err(e) => {
            let e = DynamoError::from_sdk(&format!("describing {}", super::describe(c)), e);
            if e.code.as_deref() == Some("ResourceNotFoundException") {
                return Ok(None);
            }
            return Err(e);
        }
    };
    let Some(table) = out.table else {
        return Ok(None);
    };
    let ttl_attribute = match client
        .describe_time_to_live()
        .table_name(&c.table)
        .send()
        .await
    {
        Ok(ttl) => ttl.time_to_live_description.and_then(|d| {
            matches!(
                d.time_to_live_status(),
                Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
            )
            .then(|| d.attribute_name().map(str::to_string))
            .flatten()
        }),
        // Servers without TTL support (older Alternator) have no TTL to honour.
        Err(e) => {
            tracing::debug!(
                table = %c.table,
                "no TTL description: {}",
                DynamoError::from_sdk("describing TTL", e)
            );
            None
        }
    };
    Ok(Some(Described {
        table,
        ttl_attribute,
    }))
}

/// The source table, which must exist.
pub async fn source(client: &Client, c: &Connection) -> Result<Described, DynamoError> {
    describe(client, c)
        .await?
        .ok_or_else(|| DynamoError::fatal(format!("source {} does not exist", super::describe(c))))
}

/// Makes sure the target table exists with the source's key: creates it from the source's
/// description when missing (and waits until it is `ACTIVE`), refuses it when its key differs.
/// Returns the target's description.
pub async fn ensure_target(
    client: &Client,
    c: &Connection,
    source: &Described,
    billing: Option<config::BillingMode>,
) -> Result<Described, DynamoError> {
    if let Some(existing) = describe(client, c).await? {
        same_key(c, source, &existing)?;
        return Ok(existing);
    }
    create(client, c, source, billing).await?;
    let created = wait_active(client, c).await?;
    if let Some(attr) = &source.ttl_attribute {
        enable_ttl(client, c, attr).await?;
    }
    Ok(Described {
        ttl_attribute: source.ttl_attribute.clone(),
        ..created
    })
}

/// The target table of a validation, which must exist with the source's key: nothing is
/// created or changed.
pub async fn existing_target(
    client: &Client,
    c: &Connection,
    source: &Described,
) -> Result<Described, DynamoError> {
    let existing = describe(client, c).await?.ok_or_else(|| {
        DynamoError::fatal(format!(
            "target {} does not exist: there is nothing to validate (run the migration first)",
            super::describe(c)
        ))
    })?;
    same_key(c, source, &existing)?;
    Ok(existing)
}

/// Refuses a target whose key (names and types) is not the source's.
fn same_key(c: &Connection, source: &Described, target: &Described) -> Result<(), DynamoError> {
    let (want, have) = (source.key(), target.key());
    if want != have {
        return Err(DynamoError::fatal(format!(
            "target {} exists with key {} but the source's key is {}; drop it or choose another target table",
            super::describe(c),
            show_key(&have),
            show_key(&want)
        )));
    }
    Ok(())
}

/// Enables TTL on `attr` of the created target, as on the source. A server without TTL
/// (dynalite, older Alternator) answers `UnknownOperationException`: the copy goes on, told
/// so in a warning, since expired items are not copied anyway; any other refusal stops it.
async fn enable_ttl(client: &Client, c: &Connection, attr: &str) -> Result<(), DynamoError> {
    let result = client
        .update_time_to_live()
        .table_name(&c.table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(attr)
                .build()
                .map_err(|e| DynamoError::fatal(format!("TTL specification: {e}")))?,
        )
        .send()
        .await
        .map_err(|e| DynamoError::from_sdk(&format!("enabling TTL on {}", super::describe(c)), e));
    match result {
        Ok(_) => {
            tracing::info!(table = %c.table, attribute = %attr, "TTL enabled on the created target table, as on the source");
            Ok(())
        }
        Err(e) if e.code.as_deref() == Some("UnknownOperationException") => {
            tracing::warn!(
                table = %c.table,
                attribute = %attr,
                "the target server has no TTL: items keep their TTL attribute but will not expire there ({e})"
            );
            Ok(())
        }
        Err(e) => Err(e),
    }
}

fn show_key(key: &[(String, KeyType, Option<ScalarAttributeType>)]) -> String {
    key.iter()
        .map(|(n, kt, ty)| {
            format!(
                "{n} ({} {})",
                kt.as_str(),
                ty.as_ref().map_or("?", |t| t.as_str())
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

async fn create(
    client: &Client,
    c: &Connection,
    source: &Described,
    billing: Option<config::BillingMode>,
) -> Result<(), DynamoError> {
    let t = &source.table;
    let billing = match billing {
        Some(config::BillingMode::PayPerRequest) => BillingMode::PayPerRequest,
        Some(config::BillingMode::Provisioned) => BillingMode::Provisioned,
        None => source.billing_mode(),
    };
    let provisioned = billing == BillingMode::Provisioned;
    let throughput = |p: Option<&aws_sdk_dynamodb::types::ProvisionedThroughputDescription>| {
        let read = p.and_then(|p| p.read_capacity_units()).filter(|&r| r > 0);
        let write = p.and_then(|p| p.write_capacity_units()).filter(|&w| w > 0);
        ProvisionedThroughput::builder()
            .read_capacity_units(read.unwrap_or(25))
            .write_capacity_units(write.unwrap_or(25))
            .build()
            .expect("both units set")
    };
    let mut req = client
        .create_table()
        .table_name(&c.table)
        .billing_mode(billing.clone())
        .set_attribute_definitions(Some(
            t.attribute_definitions()
                .iter()
                .map(|a| {
                    AttributeDefinition::builder()
                        .attribute_name(a.attribute_name())
                        .attribute_type(a.attribute_type().clone())
                        .build()
                        .expect("name and type set")
                })
                .collect(),
        ))
        .set_key_schema(Some(keys(t.key_schema())));
    if provisioned {
        req = req.provisioned_throughput(throughput(t.provisioned_throughput()));
    }
    for l in t.local_secondary_indexes() {
        req = req.local_secondary_indexes(
            LocalSecondaryIndex::builder()
                .set_index_name(l.index_name().map(str::to_string))
                .set_key_schema(Some(keys(l.key_schema())))
                .set_projection(l.projection().cloned())
                .build()
                .map_err(|e| DynamoError::fatal(format!("local secondary index: {e}")))?,
        );
    }
    for g in t.global_secondary_indexes() {
        let mut b = GlobalSecondaryIndex::builder()
            .set_index_name(g.index_name().map(str::to_string))
            .set_key_schema(Some(keys(g.key_schema())))
            .set_projection(g.projection().cloned());
        if provisioned {
            b = b.provisioned_throughput(throughput(
                g.provisioned_throughput().or(t.provisioned_throughput()),
            ));
        }
        req = req.global_secondary_indexes(
            b.build()
                .map_err(|e| DynamoError::fatal(format!("global secondary index: {e}")))?,
        );
    }
    req.send()
        .await
        .map_err(|e| DynamoError::from_sdk(&format!("creating {}", super::describe(c)), e))?;
    tracing::info!(
        table = %c.table,
        billing = billing.as_str(),
        lsis = t.local_secondary_indexes().len(),
        gsis = t.global_secondary_indexes().len(),
        "created the target table from the source's description"
    );
    Ok(())
}

fn keys(k: &[KeySchemaElement]) -> Vec<KeySchemaElement> {
    k.iter()
        .map(|e| {
            KeySchemaElement::builder()
                .attribute_name(e.attribute_name())
                .key_type(e.key_type().clone())
                .build()
                .expect("name and type set")
        })
        .collect()
}

async fn wait_active(client: &Client, c: &Connection) -> Result<Described, DynamoError> {
    let started = Instant::now();
    loop {
        if let Some(d) = describe(client, c).await?
            && d.table.table_status() == Some(&TableStatus::Active)
        {
            return Ok(d);
        }
        if started.elapsed() > CREATE_TIMEOUT {
            return Err(DynamoError::fatal(format!(
                "target {} did not become ACTIVE within {} s",
                super::describe(c),
                CREATE_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
