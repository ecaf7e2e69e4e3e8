//! An event source mapping's settings, as Lambda takes them (batch size, window, retries,
//! bisect, the on-failure destination, filter criteria), and its filter patterns.

use super::*;

/// How the event source feeds the handler: the template's event source settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSourceSettings {
    /// At most this many records per invocation (≥ 1).
    pub batch_size: usize,
    /// Retries of a failing record before it is dead-lettered; `u32::MAX` = forever (Lambda's
    /// `-1`, which blocks the shard until the record succeeds).
    pub max_retry_attempts: u32,
    /// `BisectBatchOnFunctionError`.
    pub bisect_on_error: bool,
    /// The event source's filter patterns: a record matching any is delivered, the others are
    /// skipped; empty = no filter, every record is delivered.
    pub filters: Vec<FilterPattern>,
    /// Backoff before the first retry of a record; doubles per further failure, capped at
    /// [`MAX_RETRY_BACKOFF`] (or this, if larger).
    pub retry_backoff: Duration,
}

impl EventSourceSettings {
    /// The settings of the `Type: DynamoDB` event `event_id` of `function_id` in the template,
    /// `!Ref Param` resolved to the parameter's Default. Only `eventName` filter patterns are
    /// supported, and the event must use `ReportBatchItemFailures` (the only response type this
    /// emulates); anything else is an error rather than a silent difference from Lambda.
    pub fn from_template(
        t: &Template,
        function_id: &str,
        event_id: &str,
    ) -> Result<Self, TemplateError> {
        let id = format!("{function_id}.Events.{event_id}");
        let invalid = |message: String| TemplateError::Invalid {
            id: id.clone(),
            message,
        };
        let def = t.stream_event(function_id, event_id)?;
        if !def
            .function_response_types
            .iter()
            .any(|r| r == "ReportBatchItemFailures")
        {
            return Err(invalid(
                "FunctionResponseTypes lacks ReportBatchItemFailures, the only response type \
                 the local event source emulates"
                    .into(),
            ));
        }
        let batch_size = match def.batch_size {
            None => DEFAULT_BATCH_SIZE,
            Some(n) => usize::try_from(n).map_err(|_| invalid(format!("BatchSize {n}")))?,
        };
        let max_retry_attempts = match def.maximum_retry_attempts {
            None | Some(-1) => u32::MAX,
            Some(n) => u32::try_from(n)
                .map_err(|_| invalid(format!("MaximumRetryAttempts {n} is out of range")))?,
        };
        let filters = def
            .filter_patterns
            .iter()
            .map(|p| FilterPattern::parse(p).map_err(&invalid))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(EventSourceSettings {
            batch_size,
            max_retry_attempts,
            bisect_on_error: def.bisect_batch_on_function_error,
            filters,
            retry_backoff: DEFAULT_RETRY_BACKOFF,
        })
    }

    /// The backoff before a batch whose most-failed record has failed `failures` times.
    pub fn backoff(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let cap = MAX_RETRY_BACKOFF.max(self.retry_backoff);
        let factor = 1u32 << (failures - 1).min(16);
        self.retry_backoff.saturating_mul(factor).min(cap)
    }

    /// Whether Lambda would deliver the record: it matches one of the filters (or there are
    /// none).
    pub fn passes(&self, record: &EventRecord) -> bool {
        if self.filters.is_empty() {
            return true;
        }
        let value = serde_json::to_value(record).unwrap_or_default();
        self.filters.iter().any(|f| f.matches(&value))
    }
}

/// One Lambda event filter pattern, in the subset of the pattern language the local event
/// source evaluates: nested objects naming fields, and at the leaves a list of values that
/// match if the field equals one of them, or `{"exists": true|false}`. Any other operator
/// (`prefix`, `anything-but`, numeric ranges) is refused when the template is read, rather than
/// evaluated differently from Lambda.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterPattern(serde_json::Value);

impl FilterPattern {
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let value: serde_json::Value = serde_json::from_str(pattern)
            .map_err(|e| format!("filter pattern {pattern} is not JSON: {e}"))?;
        fn check(v: &serde_json::Value) -> bool {
            match v {
                serde_json::Value::Object(fields) => {
                    !fields.is_empty() && fields.values().all(check)
                }
                serde_json::Value::Array(values) => {
                    !values.is_empty()
                        && values.iter().all(|v| match v {
                            serde_json::Value::String(_)
                            | serde_json::Value::Number(_)
                            | serde_json::Value::Bool(_)
                            | serde_json::Value::Null => true,
                            serde_json::Value::Object(op) => {
                                op.len() == 1 && op.get("exists").is_some_and(|e| e.is_boolean())
                            }
                            serde_json::Value::Array(_) => false,
                        })
                }
                _ => false,
            }
        }
        if !value.is_object() || !check(&value) {
            return Err(format!(
                "filter pattern {pattern} is not supported locally (fields, value lists and \
                 {{\"exists\": bool}} only)"
            ));
        }
        Ok(FilterPattern(value))
    }

    /// `{"eventName": [names…]}`.
    pub fn event_names(names: &[&str]) -> Self {
        FilterPattern(serde_json::json!({ "eventName": names }))
    }

    /// Whether the record (as Lambda's JSON) matches.
    pub fn matches(&self, record: &serde_json::Value) -> bool {
        fn at(pattern: &serde_json::Value, value: Option<&serde_json::Value>) -> bool {
            match pattern {
                serde_json::Value::Object(fields) => fields
                    .iter()
                    .all(|(name, p)| at(p, value.and_then(|v| v.get(name)))),
                serde_json::Value::Array(options) => options.iter().any(|o| match o {
                    serde_json::Value::Object(op) => {
                        op.get("exists").and_then(|e| e.as_bool()) == Some(value.is_some())
                    }
                    scalar => value == Some(scalar),
                }),
                _ => false,
            }
        }
        at(&self.0, Some(record))
    }
}
