//! Baton's group administration (`Admin`: list, describe and delete groups; list,
//! alter, reset and delete their committed offsets; lag) against Apache Kafka: the
//! scenario of `baton_testkit::admin_groups` on the shared single node, with a
//! classic group and a consumer-protocol group (KIP-848).

use baton_testkit::admin_groups::group_admin_lifecycle;

use super::{client, create_topic};
use crate::apache_kafka_util::single_node;

/// A classic and a consumer-protocol group listed, described, refused while live
/// (NON_EMPTY_GROUP, an active group's offsets, GROUP_SUBSCRIBED_TO_TOPIC),
/// rewound (a new member re-reads everything), shifted, their offsets deleted,
/// and deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_and_offsets_are_administered() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let topic = create_topic(&client, "ak-admin-groups", 3).await;
    group_admin_lifecycle(&client, &topic, 3).await;
}
