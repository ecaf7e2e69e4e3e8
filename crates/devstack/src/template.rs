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
pub const TEMPLATE_YAML: &str = include_str!("../../../template.yaml");

/// Logical id of the PR table in the template.
pub const PR_TABLE: &str = "PrTable";
/// The logical id of the entries table in template.yaml.
pub const ENTRIES_TABLE_ID: &str = "EntriesTable";
/// The logical id of the pages table in template.yaml.
pub const PAGES_TABLE_ID: &str = "PagesTable";

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

    /// Creates each `(logical id, name)` table as the template declares it.
    pub async fn create_tables(
        &self,
        client: &Client,
        tables: &[(&str, String)],
    ) -> Result<(), TemplateError> {
        for (id, name) in tables {
            self.table(id)?.create(client, name).await?;
        }
        Ok(())
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
            .map_err(|e| err(stages::aws::error_message(&e)))?;
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
                .map_err(|e| err(stages::aws::error_message(&e)))?;
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
                message: stages::aws::error_message(&e),
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
    use stages::store::{attr, FAILED_INDEX, PENDING_INDEX};

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
        let failed = table
            .global_secondary_indexes
            .iter()
            .find(|i| i.index_name == FAILED_INDEX)
            .unwrap();
        let keys: Vec<_> = failed
            .key_schema
            .iter()
            .map(|k| k.attribute_name.as_str())
            .collect();
        assert_eq!(keys, [attr::FAILED_SHARD, attr::FAILED_AT]);
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

// -------------------------------------------------------------------------------------------------
// Stream event sources: a function's `Type: DynamoDB` event, read so the local stack emulates the
// same event source mapping as Lambda (batch size, retries, bisect, filter) without drifting.
// -------------------------------------------------------------------------------------------------

/// A function's `Type: DynamoDB` event (SAM `Events.<id>.Properties`), with `!Ref Param` resolved to
/// the parameter's `Default`. Absent settings are `None`/empty (Lambda's defaults apply).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEventDefinition {
    pub starting_position: Option<String>,
    pub batch_size: Option<u64>,
    /// `-1` means infinite (Lambda's default when absent).
    pub maximum_retry_attempts: Option<i64>,
    /// `-1` means infinite (Lambda's default when absent).
    pub maximum_record_age_in_seconds: Option<i64>,
    pub bisect_batch_on_function_error: bool,
    pub function_response_types: Vec<String>,
    /// `FilterCriteria.Filters[].Pattern`, as written (JSON text); OR-ed by Lambda.
    pub filter_patterns: Vec<String>,
    /// `DestinationConfig.OnFailure.Type` (`SQS` or `SNS`), if any.
    pub on_failure_type: Option<String>,
}

impl Template {
    /// The `Default` of a template parameter.
    pub fn parameter_default(&self, name: &str) -> Result<Value, TemplateError> {
        let invalid = |message: String| TemplateError::Invalid {
            id: name.to_string(),
            message,
        };
        let parameter = self
            .doc
            .get("Parameters")
            .and_then(|p| p.get(name))
            .ok_or_else(|| invalid("is not a parameter of the template".into()))?;
        parameter
            .get("Default")
            .cloned()
            .ok_or_else(|| invalid("has no Default, so it cannot be resolved locally".into()))
    }

    /// `value` with `!Ref Param` (or `{Ref: Param}`) replaced by the parameter's `Default`; other
    /// values are returned as they are. A `Ref` to anything but a parameter is an error: there is
    /// no deployed resource to resolve it to locally.
    pub fn resolve(&self, value: &Value) -> Result<Value, TemplateError> {
        let name = match value {
            Value::Tagged(tagged) if tagged.tag == "Ref" => tagged.value.as_str(),
            Value::Mapping(m) if m.len() == 1 => m.get("Ref").and_then(Value::as_str),
            _ => return Ok(value.clone()),
        };
        match name {
            Some(name) => self.parameter_default(name),
            None => Err(TemplateError::Invalid {
                id: "Ref".into(),
                message: format!("Ref to a non-string {value:?}"),
            }),
        }
    }

    /// The `Type: DynamoDB` event `event_id` of the function resource `function_id`.
    pub fn stream_event(
        &self,
        function_id: &str,
        event_id: &str,
    ) -> Result<StreamEventDefinition, TemplateError> {
        let id = format!("{function_id}.Events.{event_id}");
        let invalid = |message: String| TemplateError::Invalid {
            id: id.clone(),
            message,
        };
        let event = self
            .properties(function_id)?
            .get("Events")
            .and_then(|e| e.get(event_id))
            .ok_or_else(|| invalid("no such event".into()))?;
        let kind = event.get("Type").and_then(Value::as_str);
        if kind != Some("DynamoDB") {
            return Err(invalid(format!("Type is {kind:?}, not DynamoDB")));
        }
        let empty = Value::Mapping(Default::default());
        let props = event.get("Properties").unwrap_or(&empty);
        let get = |key: &str| -> Result<Option<Value>, TemplateError> {
            props.get(key).map(|v| self.resolve(v)).transpose()
        };
        let integer = |key: &str| -> Result<Option<i64>, TemplateError> {
            match get(key)? {
                None => Ok(None),
                Some(v) => yaml_integer(&v)
                    .map(Some)
                    .ok_or_else(|| invalid(format!("{key} is not an integer: {v:?}"))),
            }
        };
        let string = |key: &str| -> Result<Option<String>, TemplateError> {
            match get(key)? {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s)),
                Some(v) => Err(invalid(format!("{key} is not a string: {v:?}"))),
            }
        };
        let batch_size = match integer("BatchSize")? {
            None => None,
            Some(n) => Some(
                u64::try_from(n)
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| invalid(format!("BatchSize {n} is not positive")))?,
            ),
        };
        let bisect_batch_on_function_error = match get("BisectBatchOnFunctionError")? {
            None => false,
            Some(Value::Bool(b)) => b,
            Some(Value::String(s)) if s == "true" || s == "false" => s == "true",
            Some(v) => {
                return Err(invalid(format!(
                    "BisectBatchOnFunctionError is not a boolean: {v:?}"
                )))
            }
        };
        let function_response_types = match get("FunctionResponseTypes")? {
            None => Vec::new(),
            Some(Value::Sequence(items)) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| invalid(format!("FunctionResponseTypes item {v:?}")))
                })
                .collect::<Result<_, _>>()?,
            Some(v) => return Err(invalid(format!("FunctionResponseTypes is {v:?}"))),
        };
        let filter_patterns = match props.get("FilterCriteria") {
            None => Vec::new(),
            Some(criteria) => match criteria.get("Filters") {
                Some(Value::Sequence(filters)) => filters
                    .iter()
                    .map(
                        |f| match f.get("Pattern").map(|p| self.resolve(p)).transpose()? {
                            Some(Value::String(p)) => Ok(p),
                            other => Err(invalid(format!("filter Pattern is {other:?}"))),
                        },
                    )
                    .collect::<Result<_, _>>()?,
                other => return Err(invalid(format!("FilterCriteria.Filters is {other:?}"))),
            },
        };
        let on_failure_type = props
            .get("DestinationConfig")
            .and_then(|d| d.get("OnFailure"))
            .and_then(|o| o.get("Type"))
            .map(|t| self.resolve(t))
            .transpose()?
            .and_then(|t| t.as_str().map(str::to_string));
        Ok(StreamEventDefinition {
            starting_position: string("StartingPosition")?,
            batch_size,
            maximum_retry_attempts: integer("MaximumRetryAttempts")?,
            maximum_record_age_in_seconds: integer("MaximumRecordAgeInSeconds")?,
            bisect_batch_on_function_error,
            function_response_types,
            filter_patterns,
            on_failure_type,
        })
    }
}

/// An integer written as a YAML number or as a string (parameter defaults are often quoted).
fn yaml_integer(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod stream_event_tests {
    use super::*;

    const YAML: &str = r#"
Parameters:
  Batch:
    Type: Number
    Default: 25
  Retries:
    Type: Number
    Default: "3"
  NoDefault:
    Type: String
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        S:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt Table.StreamArn
            StartingPosition: TRIM_HORIZON
            BatchSize: !Ref Batch
            MaximumRetryAttempts: { Ref: Retries }
            MaximumRecordAgeInSeconds: 3600
            BisectBatchOnFunctionError: true
            FunctionResponseTypes: [ReportBatchItemFailures]
            FilterCriteria:
              Filters:
                - Pattern: '{"eventName": ["INSERT"]}'
            DestinationConfig:
              OnFailure:
                Type: SQS
                Destination: !GetAtt Dlq.Arn
        Bad:
          Type: DynamoDB
          Properties:
            BatchSize: !Ref NoDefault
        Api:
          Type: HttpApi
"#;

    #[test]
    fn reads_a_stream_event_and_resolves_parameter_defaults() {
        let t = Template::parse(YAML).unwrap();
        let e = t.stream_event("Fn", "S").unwrap();
        assert_eq!(
            e,
            StreamEventDefinition {
                starting_position: Some("TRIM_HORIZON".into()),
                batch_size: Some(25),
                maximum_retry_attempts: Some(3),
                maximum_record_age_in_seconds: Some(3600),
                bisect_batch_on_function_error: true,
                function_response_types: vec!["ReportBatchItemFailures".into()],
                filter_patterns: vec![r#"{"eventName": ["INSERT"]}"#.into()],
                on_failure_type: Some("SQS".into()),
            }
        );
    }

    #[test]
    fn refuses_what_it_cannot_resolve() {
        let t = Template::parse(YAML).unwrap();
        assert!(t.stream_event("Fn", "Bad").is_err());
        assert!(t.stream_event("Fn", "Api").is_err());
        assert!(t.stream_event("Fn", "Missing").is_err());
        assert!(t.stream_event("Nope", "S").is_err());
    }
}

// -------------------------------------------------------------------------------------------------
// SQS queues and SQS event sources: a queue's delivery settings (visibility, redrive) and a
// function's `Type: SQS` event, read so the local stack's queues and its emulated SQS event source
// behave as the deployed ones.
// -------------------------------------------------------------------------------------------------

/// The delivery settings of an `AWS::SQS::Queue` resource, `!Ref Param` resolved to the parameter's
/// `Default`. Absent settings are `None` (SQS's defaults apply).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueDefinition {
    /// `VisibilityTimeout`, in seconds (SQS's default is 30).
    pub visibility_timeout: Option<u64>,
    /// `RedrivePolicy.maxReceiveCount`.
    pub max_receive_count: Option<u64>,
    /// The logical id of the queue `RedrivePolicy.deadLetterTargetArn` points at
    /// (`!GetAtt Dlq.Arn`), if it is written that way.
    pub dead_letter_target: Option<String>,
}

/// A function's `Type: SQS` event (SAM `Events.<id>.Properties`), `!Ref Param` resolved to the
/// parameter's `Default`. Absent settings are `None`/empty (Lambda's defaults apply).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsEventDefinition {
    /// The logical id of the queue `Queue` points at (`!GetAtt Queue.Arn`), if written that way.
    pub queue: Option<String>,
    pub batch_size: Option<u64>,
    pub maximum_batching_window_in_seconds: Option<u64>,
    pub function_response_types: Vec<String>,
    /// `ScalingConfig.MaximumConcurrency`.
    pub maximum_concurrency: Option<u64>,
}

impl Template {
    /// The resource's `Type`.
    fn resource_type(&self, id: &str) -> Result<Option<&str>, TemplateError> {
        self.doc
            .get("Resources")
            .and_then(|r| r.get(id))
            .map(|r| r.get("Type").and_then(Value::as_str))
            .ok_or_else(|| TemplateError::NoResource(id.to_string()))
    }

    /// The `AWS::SQS::Queue` resource `queue_id`.
    pub fn sqs_queue(&self, queue_id: &str) -> Result<QueueDefinition, TemplateError> {
        let invalid = |message: String| TemplateError::Invalid {
            id: queue_id.to_string(),
            message,
        };
        let kind = self.resource_type(queue_id)?;
        if kind != Some("AWS::SQS::Queue") {
            return Err(invalid(format!("Type is {kind:?}, not AWS::SQS::Queue")));
        }
        // A queue with no Properties at all is valid CloudFormation.
        let empty = Value::Mapping(Default::default());
        let props = self.properties(queue_id).unwrap_or(&empty);
        let visibility_timeout = props
            .get("VisibilityTimeout")
            .map(|v| self.non_negative(v, "VisibilityTimeout", &invalid))
            .transpose()?;
        let (max_receive_count, dead_letter_target) = match props.get("RedrivePolicy") {
            None => (None, None),
            Some(policy) => {
                let policy = match self.resolve(policy)? {
                    // The policy may also be written as a JSON string (JSON is YAML).
                    Value::String(json) => serde_yaml::from_str(&json)
                        .map_err(|e| invalid(format!("RedrivePolicy is not JSON: {e}")))?,
                    other => other,
                };
                if !policy.is_mapping() {
                    return Err(invalid(format!("RedrivePolicy is {policy:?}")));
                }
                let count = policy
                    .get("maxReceiveCount")
                    .map(|v| self.non_negative(v, "RedrivePolicy.maxReceiveCount", &invalid))
                    .transpose()?;
                let target = policy
                    .get("deadLetterTargetArn")
                    .and_then(getatt_arn_target);
                (count, target)
            }
        };
        Ok(QueueDefinition {
            visibility_timeout,
            max_receive_count,
            dead_letter_target,
        })
    }

    /// The `Type: SQS` event `event_id` of the function resource `function_id`.
    pub fn sqs_event(
        &self,
        function_id: &str,
        event_id: &str,
    ) -> Result<SqsEventDefinition, TemplateError> {
        let id = format!("{function_id}.Events.{event_id}");
        let invalid = |message: String| TemplateError::Invalid {
            id: id.clone(),
            message,
        };
        let event = self
            .properties(function_id)?
            .get("Events")
            .and_then(|e| e.get(event_id))
            .ok_or_else(|| invalid("no such event".into()))?;
        let kind = event.get("Type").and_then(Value::as_str);
        if kind != Some("SQS") {
            return Err(invalid(format!("Type is {kind:?}, not SQS")));
        }
        let empty = Value::Mapping(Default::default());
        let props = event.get("Properties").unwrap_or(&empty);
        let integer = |key: &str| -> Result<Option<u64>, TemplateError> {
            props
                .get(key)
                .map(|v| self.non_negative(v, key, &invalid))
                .transpose()
        };
        let batch_size = integer("BatchSize")?;
        if batch_size == Some(0) {
            return Err(invalid("BatchSize 0 is not positive".into()));
        }
        let function_response_types = match props
            .get("FunctionResponseTypes")
            .map(|v| self.resolve(v))
            .transpose()?
        {
            None => Vec::new(),
            Some(Value::Sequence(items)) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| invalid(format!("FunctionResponseTypes item {v:?}")))
                })
                .collect::<Result<_, _>>()?,
            Some(v) => return Err(invalid(format!("FunctionResponseTypes is {v:?}"))),
        };
        let maximum_concurrency = props
            .get("ScalingConfig")
            .and_then(|s| s.get("MaximumConcurrency"))
            .map(|v| self.non_negative(v, "ScalingConfig.MaximumConcurrency", &invalid))
            .transpose()?;
        Ok(SqsEventDefinition {
            queue: props.get("Queue").and_then(getatt_arn_target),
            batch_size,
            maximum_batching_window_in_seconds: integer("MaximumBatchingWindowInSeconds")?,
            function_response_types,
            maximum_concurrency,
        })
    }

    /// `value` (`!Ref` resolved) as a non-negative integer.
    fn non_negative(
        &self,
        value: &Value,
        key: &str,
        invalid: &dyn Fn(String) -> TemplateError,
    ) -> Result<u64, TemplateError> {
        let resolved = self.resolve(value)?;
        yaml_integer(&resolved)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| invalid(format!("{key} is not a non-negative integer: {resolved:?}")))
    }
}

/// The logical id in `!GetAtt Id.Arn`, `!GetAtt [Id, Arn]` or `{"Fn::GetAtt": [Id, Arn]}`.
fn getatt_arn_target(value: &Value) -> Option<String> {
    let target = match value {
        Value::Tagged(tagged) if tagged.tag == "GetAtt" => &tagged.value,
        Value::Mapping(m) if m.len() == 1 => m.get("Fn::GetAtt")?,
        _ => return None,
    };
    match target {
        Value::String(s) => s.strip_suffix(".Arn").map(str::to_string),
        Value::Sequence(parts) if parts.len() == 2 && parts[1].as_str() == Some("Arn") => {
            parts[0].as_str().map(str::to_string)
        }
        _ => None,
    }
}
