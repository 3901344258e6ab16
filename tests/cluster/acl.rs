//! ACLs in a cluster: bindings live in the controller's metadata log, so one
//! created through one node is described by, and enforced on, every node, and
//! one deleted through another node stops applying everywhere; topic admin
//! (deletion here) forwarded to the controller is authorized by the node first.

use baton_broker::{AuthorizerConfig, Cluster};
use baton_kafka::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermissionType, Admin,
    AdminError, Client, NewTopic, PatternType, ProduceError, Producer, ProducerRecord,
    ResourcePattern, ResourceType,
};
use baton_protocol::ErrorCode;
use baton_testkit::topic_name;
use bytes::Bytes;

async fn client_of(cluster: &Cluster, index: usize) -> Client {
    Client::builder([cluster.bootstrap_servers()[index].clone()])
        .client_id(format!("acl-node-{index}"))
        .build()
        .await
        .expect("client connects")
}

async fn send(client: &Client, topic: &str) -> Result<(), ProduceError> {
    let producer = Producer::builder(client).build();
    let record = ProducerRecord::new(topic.to_string()).value(Bytes::from_static(b"v"));
    let delivery = producer.send(record).await?;
    delivery.await.map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_created_through_one_node_applies_on_every_node() {
    // No ACL covers the cluster resource, so replication (ClusterAction) and ACL
    // administration (Alter) stay open to the unauthenticated nodes and clients.
    let cluster = Cluster::builder()
        .brokers(3)
        .in_memory()
        .authorizer(AuthorizerConfig {
            super_users: Vec::new(),
            allow_everyone_if_no_acl_found: true,
        })
        .start()
        .await
        .expect("cluster starts");
    let first = client_of(&cluster, 0).await;
    let topic = topic_name("acl-cluster");
    Admin::new(&first)
        .create_topics([NewTopic::new(topic.clone(), 3, 3)])
        .await
        .expect("topic created");
    send(&first, &topic)
        .await
        .expect("no ACL covers the topic yet");

    let deny = AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name: topic.clone(),
            pattern_type: PatternType::Literal,
        },
        entry: AccessControlEntry {
            principal: "User:*".into(),
            host: "*".into(),
            operation: AclOperation::Write,
            permission_type: AclPermissionType::Deny,
        },
    };
    Admin::new(&first)
        .create_acls([deny.clone()])
        .await
        .expect("created through node 1");
    for index in [1, 2] {
        let described = Admin::new(&client_of(&cluster, index).await)
            .describe_acls(&AclBindingFilter::any())
            .await
            .unwrap();
        assert_eq!(described, std::slice::from_ref(&deny), "node {}", index + 1);
    }
    // Every partition's leader refuses the writes (the topic, now covered by an
    // ACL that allows nothing, cannot even be described).
    let third = client_of(&cluster, 2).await;
    for _ in 0..3 {
        match send(&third, &topic).await {
            Err(ProduceError::TopicAuthorizationFailed { .. }) => {}
            other => panic!("expected TopicAuthorizationFailed, got {other:?}"),
        }
    }
    let deleted = Admin::new(&client_of(&cluster, 1).await)
        .delete_acls([AclBindingFilter::any()])
        .await
        .expect("deleted through node 2");
    assert_eq!(deleted, [deny]);
    send(&client_of(&cluster, 2).await, &topic)
        .await
        .expect("no ACL covers the topic again");

    // Topic deletion forwarded to the controller is authorized by the node first.
    let deny_all = AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name: "acl-cluster".into(),
            pattern_type: PatternType::Prefixed,
        },
        entry: AccessControlEntry {
            principal: "User:*".into(),
            host: "*".into(),
            operation: AclOperation::All,
            permission_type: AclPermissionType::Deny,
        },
    };
    let second = Admin::new(&client_of(&cluster, 1).await);
    second.create_acls([deny_all]).await.unwrap();
    let refused = |e: AdminError| match e {
        AdminError::Topics(errors) => errors.iter().map(|e| e.code).collect::<Vec<_>>(),
        other => panic!("expected topic errors, got {other:?}"),
    };
    let e = second.delete_topics([topic]).await.unwrap_err();
    assert_eq!(refused(e), [ErrorCode::TopicAuthorizationFailed]);
    cluster.shutdown().await;
}
