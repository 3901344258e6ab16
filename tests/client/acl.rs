//! ACLs against the in-process broker with an authorizer, over SASL_PLAINTEXT
//! with PLAIN users (`admin` is the super user; `alice`, `bob` and `eve` start
//! with no ACLs): produce, consume, consumer groups and admin (topics and ACLs)
//! allowed and denied with Kafka's error codes, typed on the client side; deny
//! wins over allow; prefixed and wildcard patterns; the super user;
//! `allow.everyone.if.no.acl.found`; Metadata hiding topics the principal may not
//! Describe; the ACL APIs without an authorizer (SECURITY_DISABLED).

use std::time::Duration;

use baton_broker::{
    AuthorizerConfig, Broker, BrokerConfig, BrokerHandle, ListenerSecurity, SaslSettings,
};
use baton_kafka::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclFailure, AclOperation, AclPermissionType,
    Admin, AdminError, Client, ClientError, Consumer, ConsumerError, GroupConsumer, GroupError,
    PatternType, ProduceError, Producer, ProducerRecord, ResourcePattern, ResourceType,
    SaslCredentials, SaslMechanism, SecurityProtocol, StartOffset,
};
use baton_protocol::ErrorCode;
use baton_testkit::client::consume_from_start;
use baton_testkit::{seed, topic_name};
use bytes::Bytes;

const USERS: [&str; 4] = ["admin", "alice", "bob", "eve"];
const WAIT: Duration = Duration::from_secs(30);

async fn acl_broker(allow_everyone_if_no_acl_found: bool) -> BrokerHandle {
    acl_broker_in(BrokerConfig::in_memory(), allow_everyone_if_no_acl_found).await
}

async fn acl_broker_in(base: BrokerConfig, allow_everyone_if_no_acl_found: bool) -> BrokerHandle {
    let mut sasl = SaslSettings::new([SaslMechanism::Plain]);
    for u in USERS {
        sasl = sasl.with_plain_user(u, format!("{u}-secret"));
    }
    let security = ListenerSecurity::new(SecurityProtocol::SaslPlaintext).with_sasl(sasl);
    let config = base
        .with_security(security)
        .with_authorizer(AuthorizerConfig {
            super_users: vec!["User:admin".into()],
            allow_everyone_if_no_acl_found,
        });
    Broker::start(config).await.expect("broker starts")
}

async fn client_as(broker: &BrokerHandle, user: &str) -> Client {
    Client::builder([broker.bootstrap()])
        .client_id(format!("acl-tests-{user}"))
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslCredentials::plain(user, format!("{user}-secret")))
        .build()
        .await
        .expect("client connects")
}

fn acl(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    user: &str,
    operation: AclOperation,
    permission_type: AclPermissionType,
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type,
            name: name.into(),
            pattern_type,
        },
        entry: AccessControlEntry {
            principal: format!("User:{user}"),
            host: "*".into(),
            operation,
            permission_type,
        },
    }
}

fn allow(resource_type: ResourceType, name: &str, user: &str, op: AclOperation) -> AclBinding {
    acl(
        resource_type,
        name,
        PatternType::Literal,
        user,
        op,
        AclPermissionType::Allow,
    )
}

/// The admin (super user) creates a one-partition topic.
async fn admin_topic(admin: &Admin, prefix: &str) -> String {
    let name = topic_name(prefix);
    admin
        .create_topic(name.clone(), 1, 1)
        .await
        .expect("topic created");
    name
}

async fn send_one(producer: &Producer, topic: &str) -> Result<(), ProduceError> {
    let record = ProducerRecord::new(topic.to_string()).value(Bytes::from_static(b"v"));
    let delivery = producer.send(record).await?;
    tokio::time::timeout(WAIT, delivery)
        .await
        .expect("the outcome comes without waiting for the delivery timeout")
        .map(|_| ())
}

fn acl_codes(e: AdminError) -> Vec<ErrorCode> {
    match e {
        AdminError::Acls(failures) => failures.iter().map(|f: &AclFailure| f.code).collect(),
        other => panic!("expected ACL failures, got {other:?}"),
    }
}

#[tokio::test]
async fn produce_needs_write_and_a_deny_wins() {
    let broker = acl_broker(false).await;
    let admin = Admin::new(&client_as(&broker, "admin").await);
    let topic = admin_topic(&admin, "acl-produce").await;
    let alice = client_as(&broker, "alice").await;

    // No ACL: the topic cannot even be described; the record is never sent.
    let producer = Producer::builder(&alice).build();
    match send_one(&producer, &topic).await {
        Err(ProduceError::TopicAuthorizationFailed {
            topic: t,
            partition: None,
            ..
        }) => assert_eq!(t, topic),
        other => panic!("expected TopicAuthorizationFailed, got {other:?}"),
    }

    // Write on the topic (which implies Describe, and stands for IdempotentWrite).
    admin
        .create_acls([allow(
            ResourceType::Topic,
            &topic,
            "alice",
            AclOperation::Write,
        )])
        .await
        .unwrap();
    let producer = Producer::builder(&alice).build();
    send_one(&producer, &topic).await.expect("allowed");

    // A deny for every user wins over alice's allow; the broker refuses the batch.
    admin
        .create_acls([acl(
            ResourceType::Topic,
            &topic,
            PatternType::Literal,
            "*",
            AclOperation::Write,
            AclPermissionType::Deny,
        )])
        .await
        .unwrap();
    match send_one(&producer, &topic).await {
        Err(ProduceError::TopicAuthorizationFailed {
            partition: Some(0), ..
        }) => {}
        other => panic!("expected TopicAuthorizationFailed on partition 0, got {other:?}"),
    }
    // The super user is never refused.
    let admin_producer = Producer::builder(&client_as(&broker, "admin").await).build();
    send_one(&admin_producer, &topic)
        .await
        .expect("super user writes");
    broker.shutdown().await;
}

#[tokio::test]
async fn idempotent_producer_without_any_write_is_refused_a_producer_id() {
    let broker = acl_broker(false).await;
    let admin = Admin::new(&client_as(&broker, "admin").await);
    let topic = admin_topic(&admin, "acl-idem").await;
    admin
        .create_acls([allow(
            ResourceType::Topic,
            &topic,
            "bob",
            AclOperation::Describe,
        )])
        .await
        .unwrap();
    let bob = client_as(&broker, "bob").await;
    match send_one(&Producer::builder(&bob).build(), &topic).await {
        Err(ProduceError::IdempotenceUnauthorized { code, .. }) => {
            assert_eq!(code, ErrorCode::ClusterAuthorizationFailed)
        }
        other => panic!("expected IdempotenceUnauthorized, got {other:?}"),
    }
    // IdempotentWrite on the cluster gives a producer id; Write is still needed.
    admin
        .create_acls([allow(
            ResourceType::Cluster,
            "kafka-cluster",
            "bob",
            AclOperation::IdempotentWrite,
        )])
        .await
        .unwrap();
    match send_one(&Producer::builder(&bob).build(), &topic).await {
        Err(ProduceError::TopicAuthorizationFailed {
            partition: Some(0), ..
        }) => {}
        other => panic!("expected TopicAuthorizationFailed, got {other:?}"),
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn consume_needs_read_and_prefixed_patterns_match() {
    let broker = acl_broker(false).await;
    let admin_client = client_as(&broker, "admin").await;
    let admin = Admin::new(&admin_client);
    let topic = admin_topic(&admin, "acl-read").await;
    let producer = Producer::builder(&admin_client).build();
    for _ in 0..3 {
        send_one(&producer, &topic).await.unwrap();
    }
    let alice = client_as(&broker, "alice").await;
    // Describe only: offsets can be listed, fetching is refused.
    admin
        .create_acls([allow(
            ResourceType::Topic,
            &topic,
            "alice",
            AclOperation::Describe,
        )])
        .await
        .unwrap();
    let mut consumer = Consumer::builder(&alice)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .build()
        .await
        .unwrap();
    match tokio::time::timeout(WAIT, consumer.recv()).await.unwrap() {
        Err(ConsumerError::TopicAuthorizationFailed {
            topic: t,
            partition,
        }) => {
            assert_eq!((t.as_str(), partition), (topic.as_str(), 0))
        }
        other => panic!("expected TopicAuthorizationFailed, got {other:?}"),
    }
    // Read on every topic starting with "acl-read".
    admin
        .create_acls([acl(
            ResourceType::Topic,
            "acl-read",
            PatternType::Prefixed,
            "alice",
            AclOperation::Read,
            AclPermissionType::Allow,
        )])
        .await
        .unwrap();
    let got = consume_from_start(&alice, &topic, 1, 3, seed()).await;
    assert_eq!(got.len(), 3);
    broker.shutdown().await;
}

#[tokio::test]
async fn consumer_group_needs_read_on_the_group() {
    let broker = acl_broker(false).await;
    let admin_client = client_as(&broker, "admin").await;
    let admin = Admin::new(&admin_client);
    let topic = admin_topic(&admin, "acl-group").await;
    send_one(&Producer::builder(&admin_client).build(), &topic)
        .await
        .unwrap();
    admin
        .create_acls([allow(
            ResourceType::Topic,
            &topic,
            "alice",
            AclOperation::Read,
        )])
        .await
        .unwrap();
    let alice = client_as(&broker, "alice").await;
    let group = topic_name("acl-group-g");
    let build = || {
        GroupConsumer::builder(&alice, group.clone())
            .subscribe([topic.clone()])
            .session_timeout(Duration::from_secs(6))
            .heartbeat_interval(Duration::from_millis(100))
            .max_wait(Duration::from_millis(50))
    };
    let refused = async {
        let mut consumer = build().build().await?;
        consumer.recv().await.map(|_| ())
    };
    match tokio::time::timeout(WAIT, refused).await.unwrap() {
        Err(GroupError::Coordinator { code, .. }) => {
            assert_eq!(code, ErrorCode::GroupAuthorizationFailed)
        }
        other => panic!("expected GROUP_AUTHORIZATION_FAILED, got {other:?}"),
    }
    admin
        .create_acls([allow(
            ResourceType::Group,
            &group,
            "alice",
            AclOperation::Read,
        )])
        .await
        .unwrap();
    let mut consumer = build().build().await.unwrap();
    let record = tokio::time::timeout(WAIT, consumer.recv())
        .await
        .unwrap()
        .expect("consumes in the group");
    assert_eq!(record.value.as_deref(), Some(&b"v"[..]));
    consumer
        .commit()
        .await
        .expect("commits with Read on group and topic");
    broker.shutdown().await;
}

#[tokio::test]
async fn topic_admin_needs_create_and_delete() {
    let broker = acl_broker(false).await;
    let admin = Admin::new(&client_as(&broker, "admin").await);
    let alice = Admin::new(&client_as(&broker, "alice").await);
    let topic = topic_name("acl-admin");
    let refused = |e: AdminError| match e {
        AdminError::Topics(errors) => errors.iter().map(|e| e.code).collect::<Vec<_>>(),
        other => panic!("expected topic errors, got {other:?}"),
    };
    let e = alice.create_topic(topic.clone(), 1, 1).await.unwrap_err();
    assert_eq!(refused(e), [ErrorCode::TopicAuthorizationFailed]);
    // Create on the cluster, and Describe on the topics she makes (to see them).
    admin
        .create_acls([
            allow(
                ResourceType::Cluster,
                "kafka-cluster",
                "alice",
                AclOperation::Create,
            ),
            acl(
                ResourceType::Topic,
                "acl-admin",
                PatternType::Prefixed,
                "alice",
                AclOperation::Describe,
                AclPermissionType::Allow,
            ),
        ])
        .await
        .unwrap();
    alice
        .create_topic(topic.clone(), 1, 1)
        .await
        .expect("created");
    let e = alice.delete_topics([topic.clone()]).await.unwrap_err();
    assert_eq!(refused(e), [ErrorCode::TopicAuthorizationFailed]);
    admin
        .create_acls([allow(
            ResourceType::Topic,
            &topic,
            "alice",
            AclOperation::Delete,
        )])
        .await
        .unwrap();
    alice.delete_topics([topic]).await.expect("deleted");
    broker.shutdown().await;
}

#[tokio::test]
async fn acl_admin_needs_alter_and_describe_on_the_cluster() {
    let broker = acl_broker(false).await;
    let admin = Admin::new(&client_as(&broker, "admin").await);
    let alice = Admin::new(&client_as(&broker, "alice").await);
    let read = acl(
        ResourceType::Topic,
        "orders",
        PatternType::Prefixed,
        "bob",
        AclOperation::Read,
        AclPermissionType::Allow,
    );
    let e = alice.create_acls([read.clone()]).await.unwrap_err();
    assert_eq!(acl_codes(e), [ErrorCode::ClusterAuthorizationFailed]);
    let e = alice
        .describe_acls(&AclBindingFilter::any())
        .await
        .unwrap_err();
    assert_eq!(acl_codes(e), [ErrorCode::ClusterAuthorizationFailed]);

    let write = allow(ResourceType::Topic, "orders-eu", "bob", AclOperation::Write);
    let group = allow(ResourceType::Group, "g", "bob", AclOperation::Read);
    admin
        .create_acls([read.clone(), write.clone(), group.clone(), read.clone()])
        .await
        .unwrap();
    // A malformed binding is refused alone.
    let mut bad = write.clone();
    bad.entry.principal = "bob".into();
    let e = admin.create_acls([write.clone(), bad]).await.unwrap_err();
    assert_eq!(acl_codes(e), [ErrorCode::InvalidRequest]);

    let mut all = admin.describe_acls(&AclBindingFilter::any()).await.unwrap();
    all.sort();
    let mut expected = vec![read.clone(), write.clone(), group.clone()];
    expected.sort();
    assert_eq!(all, expected);
    // MATCH selects every pattern covering the name: the prefix and the literal.
    let matching = AclBindingFilter {
        resource_type: ResourceType::Topic,
        name: Some("orders-eu".into()),
        pattern_type: PatternType::Match,
        ..AclBindingFilter::any()
    };
    let mut found = admin.describe_acls(&matching).await.unwrap();
    found.sort();
    let mut both = vec![read.clone(), write.clone()];
    both.sort();
    assert_eq!(found, both);

    // Alter on the cluster lets alice manage ACLs (Alter implies Describe).
    admin
        .create_acls([allow(
            ResourceType::Cluster,
            "kafka-cluster",
            "alice",
            AclOperation::Alter,
        )])
        .await
        .unwrap();
    let by_group = AclBindingFilter {
        resource_type: ResourceType::Group,
        ..AclBindingFilter::any()
    };
    assert_eq!(alice.delete_acls([by_group]).await.unwrap(), [group]);
    assert_eq!(alice.describe_acls(&matching).await.unwrap().len(), 2);
    broker.shutdown().await;
}

#[tokio::test]
async fn acl_apis_without_an_authorizer_are_security_disabled() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let client = Client::builder([broker.bootstrap()]).build().await.unwrap();
    let admin = Admin::new(&client);
    let binding = allow(ResourceType::Topic, "t", "alice", AclOperation::Read);
    let e = admin.create_acls([binding]).await.unwrap_err();
    assert_eq!(acl_codes(e), [ErrorCode::SecurityDisabled]);
    let e = admin
        .describe_acls(&AclBindingFilter::any())
        .await
        .unwrap_err();
    assert_eq!(acl_codes(e), [ErrorCode::SecurityDisabled]);
    let e = admin
        .delete_acls([AclBindingFilter::any()])
        .await
        .unwrap_err();
    assert_eq!(acl_codes(e), [ErrorCode::SecurityDisabled]);
    broker.shutdown().await;
}

#[tokio::test]
async fn allow_everyone_if_no_acl_found_opens_only_uncovered_resources() {
    let broker = acl_broker(true).await;
    let admin = Admin::new(&client_as(&broker, "admin").await);
    let open = admin_topic(&admin, "acl-open").await;
    let guarded = admin_topic(&admin, "acl-guarded").await;
    admin
        .create_acls([allow(
            ResourceType::Topic,
            &guarded,
            "alice",
            AclOperation::All,
        )])
        .await
        .unwrap();
    let eve = Producer::builder(&client_as(&broker, "eve").await).build();
    send_one(&eve, &open)
        .await
        .expect("no ACL covers the topic");
    match send_one(&eve, &guarded).await {
        Err(ProduceError::TopicAuthorizationFailed { .. }) => {}
        other => panic!("an ACL covers the topic, so eve is refused; got {other:?}"),
    }
    let alice = Producer::builder(&client_as(&broker, "alice").await).build();
    send_one(&alice, &guarded).await.expect("All covers Write");
    broker.shutdown().await;
}

#[tokio::test]
async fn metadata_hides_topics_the_principal_may_not_describe() {
    let broker = acl_broker(false).await;
    let admin = Admin::new(&client_as(&broker, "admin").await);
    let visible = admin_topic(&admin, "acl-visible").await;
    let hidden = admin_topic(&admin, "acl-hidden").await;
    admin
        .create_acls([allow(
            ResourceType::Topic,
            &visible,
            "alice",
            AclOperation::Read,
        )])
        .await
        .unwrap();
    let alice = client_as(&broker, "alice").await;
    let all = alice.refresh_metadata().await.unwrap();
    assert!(all.topic(&visible).is_some(), "Read implies Describe");
    assert!(
        all.topic(&hidden).is_none(),
        "hidden from all-topics metadata"
    );
    let e = Admin::new(&alice)
        .list_offsets([(hidden.clone(), 0, baton_kafka::OffsetSpec::Latest)])
        .await
        .unwrap_err();
    match e {
        AdminError::Client(ClientError::TopicAuthorizationFailed { topic }) => {
            assert_eq!(topic, hidden)
        }
        other => panic!("expected TopicAuthorizationFailed, got {other:?}"),
    }
    let full = Admin::new(&client_as(&broker, "admin").await)
        .describe_cluster()
        .await
        .unwrap();
    assert!(
        full.topic(&hidden).is_some(),
        "the super user sees every topic"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn acls_survive_a_restart_of_a_broker_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let broker = acl_broker_in(BrokerConfig::on_disk(dir.path()), false).await;
    let admin = Admin::new(&client_as(&broker, "admin").await);
    let topic = admin_topic(&admin, "acl-disk").await;
    let write = allow(ResourceType::Topic, &topic, "alice", AclOperation::Write);
    let read = allow(ResourceType::Topic, &topic, "bob", AclOperation::Read);
    admin
        .create_acls([write.clone(), read.clone()])
        .await
        .unwrap();
    let bob_only = AclBindingFilter {
        principal: Some("User:bob".into()),
        ..AclBindingFilter::any()
    };
    assert_eq!(admin.delete_acls([bob_only]).await.unwrap(), [read]);
    broker.shutdown().await;

    let broker = acl_broker_in(BrokerConfig::on_disk(dir.path()), false).await;
    let admin = Admin::new(&client_as(&broker, "admin").await);
    assert_eq!(
        admin.describe_acls(&AclBindingFilter::any()).await.unwrap(),
        [write]
    );
    let alice = Producer::builder(&client_as(&broker, "alice").await).build();
    send_one(&alice, &topic)
        .await
        .expect("the stored ACL applies");
    broker.shutdown().await;
}

mod certificate_principal {
    //! On an `SSL` listener with client certificates, the principal is the
    //! certificate's subject DN in RFC 2253 form (`User:CN=app,O=Baton`).

    use super::*;
    use baton_broker::{ClientAuth, TlsSettings};
    use baton_kafka::TlsConfig;
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
        ExtendedKeyUsagePurpose, IsCa, KeyPair,
    };

    fn leaf(
        issuer: &CertifiedIssuer<'static, KeyPair>,
        sans: Vec<String>,
        usage: ExtendedKeyUsagePurpose,
        dn: &[(DnType, &str)],
    ) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name = DistinguishedName::new();
        for (t, v) in dn {
            params.distinguished_name.push(t.clone(), *v);
        }
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[tokio::test]
    async fn ssl_principal_is_the_certificate_subject() {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "acl test CA");
        let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let (broker_cert, broker_key) = leaf(
            &issuer,
            vec!["127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
            &[(DnType::CommonName, "broker")],
        );
        let (client_cert, client_key) = leaf(
            &issuer,
            Vec::new(),
            ExtendedKeyUsagePurpose::ClientAuth,
            &[
                (DnType::OrganizationName, "Baton"),
                (DnType::CommonName, "app"),
            ],
        );
        let tls = TlsSettings::from_pem(broker_cert.as_bytes(), broker_key.as_bytes())
            .unwrap()
            .with_client_auth(ClientAuth::Required, issuer.pem().as_bytes())
            .unwrap();
        let security = ListenerSecurity::new(SecurityProtocol::Ssl).with_tls(tls);
        let config = BrokerConfig::in_memory()
            .with_security(security)
            .with_authorizer(AuthorizerConfig {
                super_users: vec!["User:CN=admin".into()],
                allow_everyone_if_no_acl_found: false,
            });
        let broker = Broker::start(config).await.unwrap();
        let (admin_cert, admin_key) = leaf(
            &issuer,
            Vec::new(),
            ExtendedKeyUsagePurpose::ClientAuth,
            &[(DnType::CommonName, "admin")],
        );
        let connect = |cert: String, key: String| {
            let tls = TlsConfig::with_ca_pem(issuer.pem().as_bytes())
                .unwrap()
                .client_cert_pem(cert.as_bytes(), key.as_bytes())
                .unwrap();
            Client::builder([broker.bootstrap()])
                .security_protocol(SecurityProtocol::Ssl)
                .tls(tls)
                .build()
        };
        let app = Admin::new(&connect(client_cert, client_key).await.unwrap());
        let admin = Admin::new(&connect(admin_cert, admin_key).await.unwrap());
        let topic = topic_name("acl-cert");
        let e = app.create_topic(topic.clone(), 1, 1).await.unwrap_err();
        assert!(matches!(e, AdminError::Topics(_)), "{e:?}");
        // ACLs for the certificate's subject, as Kafka names it.
        let user = "CN=app,O=Baton";
        admin
            .create_acls([
                allow(
                    ResourceType::Cluster,
                    "kafka-cluster",
                    user,
                    AclOperation::Create,
                ),
                allow(ResourceType::Topic, &topic, user, AclOperation::All),
            ])
            .await
            .unwrap();
        app.create_topic(topic.clone(), 1, 1)
            .await
            .expect("created");
        app.delete_topics([topic]).await.expect("deleted");
        broker.shutdown().await;
    }
}
