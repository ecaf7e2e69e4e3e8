//! Reads `template.yaml` so the emulator's table is created from the deployed definition and
//! the tested schema cannot drift from it.

use serde::Deserialize;
use serde_yaml::Value;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;

/// The SAM template, as shipped with the code.
pub const TEMPLATE_YAML: &str = include_str!("../../template.yaml");

/// Logical id of the PR table in the template.
pub const PR_TABLE: &str = "PrTable";

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("template.yaml is not valid YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("template.yaml has no resource {0}")]
    NoResource(String),
    #[error("resource {id} in template.yaml: {message}")]
    Invalid { id: String, message: String },
    #[error("creating table {table} failed: {message}")]
    Create { table: String, message: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TableDefinition {
    pub attribute_definitions: Vec<AttributeDef>,
    pub key_schema: Vec<KeyDef>,
    #[serde(default)]
    pub global_secondary_indexes: Vec<IndexDef>,
    pub billing_mode: String,
    pub stream_specification: Option<StreamDef>,
    pub time_to_live_specification: Option<TtlDef>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AttributeDef {
    pub attribute_name: String,
    pub attribute_type: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct KeyDef {
    pub attribute_name: String,
    pub key_type: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct IndexDef {
    pub index_name: String,
    pub key_schema: Vec<KeyDef>,
    pub projection: ProjectionDef,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ProjectionDef {
    pub projection_type: String,
    #[serde(default)]
    pub non_key_attributes: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StreamDef {
    pub stream_view_type: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TtlDef {
    pub attribute_name: String,
    pub enabled: bool,
}

pub struct Template {
    doc: Value,
}

impl Template {
    pub fn bundled() -> Result<Self, TemplateError> {
        Self::parse(TEMPLATE_YAML)
    }

    pub fn parse(yaml: &str) -> Result<Self, TemplateError> {
        Ok(Template {
            doc: serde_yaml::from_str(yaml)?,
        })
    }

    fn properties(&self, id: &str) -> Result<&Value, TemplateError> {
        self.doc
            .get("Resources")
            .and_then(|r| r.get(id))
            .and_then(|r| r.get("Properties"))
            .ok_or_else(|| TemplateError::NoResource(id.to_string()))
    }

    pub fn table(&self, id: &str) -> Result<TableDefinition, TemplateError> {
        serde_yaml::from_value(self.properties(id)?.clone()).map_err(|e| TemplateError::Invalid {
            id: id.to_string(),
            message: e.to_string(),
        })
    }
}

impl TableDefinition {
    /// Creates the table under `name` (and its TTL setting) as CloudFormation would.
    pub async fn create(&self, client: &Client, name: &str) -> Result<(), TemplateError> {
        let err = |message: String| TemplateError::Create {
            table: name.to_string(),
            message,
        };
        let mut request = client
            .create_table()
            .table_name(name)
            .billing_mode(BillingMode::from(self.billing_mode.as_str()));
        for a in &self.attribute_definitions {
            request = request.attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(&a.attribute_name)
                    .attribute_type(ScalarAttributeType::from(a.attribute_type.as_str()))
                    .build()
                    .map_err(|e| err(e.to_string()))?,
            );
        }
        request = request.set_key_schema(Some(key_schema(&self.key_schema).map_err(err)?));
        for index in &self.global_secondary_indexes {
            let projection = Projection::builder()
                .projection_type(ProjectionType::from(
                    index.projection.projection_type.as_str(),
                ))
                .set_non_key_attributes(
                    (!index.projection.non_key_attributes.is_empty())
                        .then(|| index.projection.non_key_attributes.clone()),
                )
                .build();
            request = request.global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(&index.index_name)
                    .set_key_schema(Some(key_schema(&index.key_schema).map_err(err)?))
                    .projection(projection)
                    .build()
                    .map_err(|e| err(e.to_string()))?,
            );
        }
        if let Some(stream) = &self.stream_specification {
            request = request.stream_specification(
                StreamSpecification::builder()
                    .stream_enabled(true)
                    .stream_view_type(StreamViewType::from(stream.stream_view_type.as_str()))
                    .build()
                    .map_err(|e| err(e.to_string()))?,
            );
        }
        request
            .send()
            .await
            .map_err(|e| err(shared::aws::error_message(&e)))?;
        if let Some(ttl) = self
            .time_to_live_specification
            .as_ref()
            .filter(|t| t.enabled)
        {
            client
                .update_time_to_live()
                .table_name(name)
                .time_to_live_specification(
                    TimeToLiveSpecification::builder()
                        .attribute_name(&ttl.attribute_name)
                        .enabled(true)
                        .build()
                        .map_err(|e| err(e.to_string()))?,
                )
                .send()
                .await
                .map_err(|e| err(shared::aws::error_message(&e)))?;
        }
        Ok(())
    }

    /// Creates the table unless it exists. Returns whether it was created.
    pub async fn create_if_missing(
        &self,
        client: &Client,
        name: &str,
    ) -> Result<bool, TemplateError> {
        match client.describe_table().table_name(name).send().await {
            Ok(_) => Ok(false),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                self.create(client, name).await.map(|()| true)
            }
            Err(e) => Err(TemplateError::Create {
                table: name.to_string(),
                message: shared::aws::error_message(&e),
            }),
        }
    }
}

fn key_schema(keys: &[KeyDef]) -> Result<Vec<KeySchemaElement>, String> {
    keys.iter()
        .map(|k| {
            KeySchemaElement::builder()
                .attribute_name(&k.attribute_name)
                .key_type(KeyType::from(k.key_type.as_str()))
                .build()
                .map_err(|e| e.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::store::{attr, PENDING_INDEX};

    #[test]
    fn bundled_table_matches_the_store_contract() {
        let table = Template::bundled().unwrap().table(PR_TABLE).unwrap();
        let keys: Vec<_> = table
            .key_schema
            .iter()
            .map(|k| (k.attribute_name.as_str(), k.key_type.as_str()))
            .collect();
        assert_eq!(keys, [(attr::REPO, "HASH"), (attr::PR_NUMBER, "RANGE")]);
        let pending = table
            .global_secondary_indexes
            .iter()
            .find(|i| i.index_name == PENDING_INDEX)
            .unwrap();
        let keys: Vec<_> = pending
            .key_schema
            .iter()
            .map(|k| k.attribute_name.as_str())
            .collect();
        assert_eq!(keys, [attr::PENDING_SHARD, attr::MERGED_AT]);
        assert_eq!(table.billing_mode, "PAY_PER_REQUEST");
        assert_eq!(
            table.stream_specification.unwrap().stream_view_type,
            "NEW_AND_OLD_IMAGES"
        );
        assert_eq!(
            table.time_to_live_specification.unwrap().attribute_name,
            attr::EXPIRES_AT
        );
    }
}
