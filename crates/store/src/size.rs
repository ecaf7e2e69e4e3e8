//! What an item costs: its size as DynamoDB counts it, the write units that makes, and the
//! projection the pending index keeps.

use super::*;

/// An item's size as DynamoDB bills it: attribute names plus values, numbers at about one byte
/// per two digits, lists and maps with 3 bytes overhead plus 1 per element.
pub fn item_size(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

pub(super) fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => {
            let digits = n.chars().filter(char::is_ascii_digit).count();
            digits.div_ceil(2) + 1
        }
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::L(l) => 3 + l.iter().map(|e| 1 + value_size(e)).sum::<usize>(),
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, e)| 1 + k.len() + value_size(e))
                .sum::<usize>()
        }
        AttributeValue::Ss(ss) => 3 + ss.iter().map(String::len).sum::<usize>(),
        AttributeValue::Ns(ns) => 3 + ns.iter().map(|n| n.len().div_ceil(2) + 1).sum::<usize>(),
        AttributeValue::Bs(bs) => 3 + bs.iter().map(|b| b.as_ref().len()).sum::<usize>(),
        _ => 0,
    }
}

/// Write capacity units for writing an item of `bytes` (1 WCU per started KB).
pub fn write_units(bytes: usize) -> usize {
    bytes.div_ceil(1024).max(1)
}

/// The attributes the pending GSI holds for an item (its projection: keys plus `INCLUDE`d ones),
/// to price the index write that accompanies an insert.
pub fn pending_index_projection(item: &Item) -> Item {
    const PROJECTED: &[&str] = &[
        attr::REPO,
        attr::PR_NUMBER,
        attr::PENDING_SHARD,
        attr::MERGED_AT,
        attr::RECEIVED_AT,
        attr::ENRICHED_AT,
        attr::ENQUEUED_UNTIL,
    ];
    item.iter()
        .filter(|(k, _)| PROJECTED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
