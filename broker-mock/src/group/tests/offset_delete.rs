//! OffsetDelete's group check: which topics' offsets a classic group keeps.

use std::collections::BTreeSet;

use baton_protocol::messages::ConsumerProtocolSubscription;

use super::*;

/// A member joins group "g" with `protocol_type`, subscribed to `topics`.
fn member_joins(h: &mut Harness, protocol_type: &str, topics: &[&str]) {
    let sub = ConsumerProtocolSubscription {
        topics: topics.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    }
    .encode_versioned(1)
    .unwrap();
    let mut req = Harness::join_req("", None, b"");
    req.protocol_type = protocol_type.into();
    req.protocols = vec![("range".into(), sub)];
    let (w, out) = h.join(req.clone());
    req.member_id = join_of(&out, w)
        .expect("member id handed out")
        .member_id
        .clone();
    h.join(req);
}

#[test]
fn offset_delete_keeps_the_subscribed_topics() {
    let mut h = Harness::new(0);
    assert_eq!(
        h.groups.offset_delete_protected("g"),
        Err(ErrorCode::GroupIdNotFound)
    );
    let o = CommittedOffset {
        offset: 5,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp: h.now,
    };
    h.groups.apply_offset("g", "t", 0, Some(o), 0);
    assert_eq!(
        h.groups.offset_delete_protected("g"),
        Ok(BTreeSet::new()),
        "an empty group keeps nothing"
    );
    member_joins(&mut h, "consumer", &["t", "u"]);
    let kept: BTreeSet<String> = ["t".to_string(), "u".to_string()].into();
    assert_eq!(h.groups.offset_delete_protected("g"), Ok(kept));

    let mut other = Harness::new(0);
    member_joins(&mut other, "connect", &["t"]);
    assert_eq!(
        other.groups.offset_delete_protected("g"),
        Err(ErrorCode::NonEmptyGroup),
        "another protocol type's subscriptions cannot be read"
    );
}
