//! A DynamoDB stream record as Lambda delivers it to a function (`Records[]` of the DynamoDB
//! event): what the local stack's stream source feeds the enrich handler, and what `chronicle
//! redrive enrich` rebuilds from the records a failed batch names.

use std::time::SystemTime;

use aws_lambda_events::event::dynamodb::{EventRecord, StreamRecord, StreamViewType, UserIdentity};
use aws_sdk_dynamodbstreams::types::Record;

/// A stream record as Lambda delivers it to a function (`Records[]` of the DynamoDB event).
/// `awsRegion` is `region` (moto writes a fixed one into its records).
pub fn to_lambda_record(record: &Record, stream_arn: &str, region: &str) -> EventRecord {
    let mut out = EventRecord::default();
    out.aws_region = if region.is_empty() {
        record.aws_region.clone().unwrap_or_default()
    } else {
        region.to_string()
    };
    out.event_id = record.event_id.clone().unwrap_or_default();
    out.event_name = record
        .event_name
        .as_ref()
        .map(|n| n.as_str().to_string())
        .unwrap_or_default();
    out.event_version = Some("1.1".to_string());
    out.event_source = Some("aws:dynamodb".to_string());
    out.event_source_arn = Some(stream_arn.to_string());
    out.user_identity = record.user_identity.as_ref().map(|i| {
        let mut u = UserIdentity::default();
        u.type_ = i.r#type.clone().unwrap_or_default();
        u.principal_id = i.principal_id.clone().unwrap_or_default();
        u
    });
    let mut change = StreamRecord::default();
    if let Some(d) = &record.dynamodb {
        if let Some(t) = d
            .approximate_creation_date_time
            .and_then(|t| SystemTime::try_from(t).ok())
        {
            change.approximate_creation_date_time = t.into();
        }
        change.keys = d.keys.clone().unwrap_or_default().into();
        change.new_image = d.new_image.clone().unwrap_or_default().into();
        change.old_image = d.old_image.clone().unwrap_or_default().into();
        change.sequence_number = d.sequence_number.clone();
        change.size_bytes = d.size_bytes.unwrap_or_default();
        change.stream_view_type = d.stream_view_type.as_ref().and_then(|v| match v.as_str() {
            "NEW_IMAGE" => Some(StreamViewType::NewImage),
            "OLD_IMAGE" => Some(StreamViewType::OldImage),
            "NEW_AND_OLD_IMAGES" => Some(StreamViewType::NewAndOldImages),
            "KEYS_ONLY" => Some(StreamViewType::KeysOnly),
            _ => None,
        });
    }
    out.change = change;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambda_shape_of_a_stream_record() {
        use aws_sdk_dynamodbstreams::types::{AttributeValue, OperationType, StreamRecord as Sr};
        let record = Record::builder()
            .event_id("e1")
            .event_name(OperationType::Insert)
            .aws_region("us-east-1")
            .dynamodb(
                Sr::builder()
                    .keys("repo", AttributeValue::S("o/r".into()))
                    .keys("prNumber", AttributeValue::N("7".into()))
                    .new_image("title", AttributeValue::S("t".into()))
                    .sequence_number("100")
                    .size_bytes(42)
                    .stream_view_type(
                        aws_sdk_dynamodbstreams::types::StreamViewType::NewAndOldImages,
                    )
                    .approximate_creation_date_time(
                        aws_sdk_dynamodbstreams::primitives::DateTime::from_secs(1_700_000_000),
                    )
                    .build(),
            )
            .build();
        let r = to_lambda_record(&record, "arn:stream", "eu-west-1");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["eventID"], "e1");
        assert_eq!(v["eventName"], "INSERT");
        assert_eq!(v["eventVersion"], "1.1");
        assert_eq!(v["eventSource"], "aws:dynamodb");
        assert_eq!(v["awsRegion"], "eu-west-1");
        assert_eq!(v["eventSourceARN"], "arn:stream");
        let d = &v["dynamodb"];
        assert_eq!(d["Keys"]["repo"]["S"], "o/r");
        assert_eq!(d["Keys"]["prNumber"]["N"], "7");
        assert_eq!(d["NewImage"]["title"]["S"], "t");
        assert_eq!(d["SequenceNumber"], "100");
        assert_eq!(d["SizeBytes"], 42);
        assert_eq!(d["StreamViewType"], "NEW_AND_OLD_IMAGES");
        assert_eq!(d["ApproximateCreationDateTime"], 1_700_000_000.0);
    }
}
