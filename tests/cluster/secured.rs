//! A 3-node cluster whose nodes each have a SASL_SSL client listener (SCRAM-SHA-512,
//! a certificate for the listen IP) and whose own traffic (replication,
//! controller RPC) runs over SASL_SSL as an inter-broker SCRAM user: Baton clients
//! bootstrapped on the client listener are told every node's endpoint of it, a
//! plaintext client is refused on the internal listener, and a producer and a
//! consumer go through a hard-killed leader's failover with nothing acknowledged
//! lost. ACL authorization is on: the inter-broker user is a super user (so
//! replication and controller traffic pass), `admin` is one too, and the
//! application user `app` may use only its topic, from the ACL `admin` creates.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_broker::{
    AuthorizerConfig, Cluster, InterNodeSecurity, ListenerConfig, ListenerSecurity, SaslSettings,
    TlsSettings,
};
use baton_kafka::{
    AccessControlEntry, Acks, AclBinding, AclOperation, AclPermissionType, Admin, Client, NewTopic,
    PatternType, ProduceError, Producer, ProducerRecord, ResourcePattern, ResourceType,
    SaslCredentials, SaslMechanism, SecurityProtocol, TlsConfig,
};
use baton_testkit::cluster::{check_history, value};
use baton_testkit::topic_name;

const LONG: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_clients_survive_a_leader_failover() {
    baton_testkit::init_tracing();
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    let tls = TlsSettings::from_pem(
        cert.cert.pem().as_bytes(),
        cert.signing_key.serialize_pem().as_bytes(),
    )
    .unwrap();
    let sasl = SaslSettings::new([SaslMechanism::ScramSha512])
        .with_scram_user(SaslMechanism::ScramSha512, "app", "app-secret")
        .unwrap()
        .with_scram_user(SaslMechanism::ScramSha512, "admin", "admin-secret")
        .unwrap();
    let listener = ListenerConfig::new(
        "CLIENT",
        ListenerSecurity::new(SecurityProtocol::SaslSsl)
            .with_sasl(sasl)
            .with_tls(tls.clone()),
    );
    let internal = ListenerSecurity::new(SecurityProtocol::SaslSsl)
        .with_sasl(
            SaslSettings::new([SaslMechanism::ScramSha512])
                .with_scram_user(SaslMechanism::ScramSha512, "broker", "broker-secret")
                .unwrap(),
        )
        .with_tls(tls);
    let inter_node = InterNodeSecurity::new(internal, cert.cert.pem().as_bytes())
        .unwrap()
        .with_sasl_user(SaslMechanism::ScramSha512, "broker", "broker-secret");
    let mut cluster = Cluster::builder()
        .brokers(3)
        .session_timeout(Duration::from_secs(4))
        .client_listener(listener)
        .inter_node_security(inter_node)
        .authorizer(AuthorizerConfig {
            super_users: vec!["User:admin".into()],
            allow_everyone_if_no_acl_found: false,
        })
        .start()
        .await
        .expect("cluster starts with secured inter-node traffic");
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, cert.cert.pem()).unwrap();
    let bootstrap = cluster.listener_bootstrap("CLIENT");
    let secured_ports: Vec<u16> = bootstrap
        .split(',')
        .map(|a| a.rsplit_once(':').unwrap().1.parse().unwrap())
        .collect();
    assert_eq!(secured_ports.len(), 3);
    let connect = |user: &'static str, password: &'static str| {
        let (bootstrap, ca) = (bootstrap.clone(), ca.clone());
        async move {
            Client::builder(bootstrap.split(',').map(str::to_owned))
                .client_id("secured-cluster-test")
                .request_timeout(Duration::from_secs(10))
                .security_protocol(SecurityProtocol::SaslSsl)
                .tls(TlsConfig::with_ca_pem_file(&ca).unwrap())
                .sasl(SaslCredentials::scram_sha512(user, password))
                .build()
                .await
                .expect("client connects over SASL_SSL")
        }
    };
    let client = connect("app", "app-secret").await;
    let admin = Admin::new(&connect("admin", "admin-secret").await);
    let meta = admin.describe_cluster().await.unwrap();
    let mut advertised: Vec<u16> = meta.brokers.values().map(|b| b.port as u16).collect();
    advertised.sort_unstable();
    let mut expected = secured_ports.clone();
    expected.sort_unstable();
    assert_eq!(
        advertised, expected,
        "Metadata names the SASL_SSL endpoints"
    );

    let topic = topic_name("secured");
    admin
        .create_topics([NewTopic::new(topic.clone(), 1, 3).config("min.insync.replicas", "2")])
        .await
        .expect("topic created");
    let app = Admin::new(&client);
    let refused = app
        .create_topics([NewTopic::new(topic_name("not-app"), 1, 3)])
        .await;
    assert!(refused.is_err(), "app may not create topics: {refused:?}");
    let early = Producer::builder(&client).build();
    let refused = match early
        .send(ProducerRecord::new(topic.clone()).value(value(u64::MAX)))
        .await
    {
        Ok(delivery) => tokio::time::timeout(LONG, delivery)
            .await
            .expect("refused without waiting for the delivery timeout")
            .map(|_| ()),
        Err(e) => Err(e),
    };
    assert!(
        matches!(refused, Err(ProduceError::TopicAuthorizationFailed { .. })),
        "app may not write to the topic before the ACL: {refused:?}"
    );
    drop(early);
    admin
        .create_acls([AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::Topic,
                name: topic.clone(),
                pattern_type: PatternType::Literal,
            },
            entry: AccessControlEntry {
                principal: "User:app".into(),
                host: "*".into(),
                operation: AclOperation::All,
                permission_type: AclPermissionType::Allow,
            },
        }])
        .await
        .expect("ACL created through the controller");
    let producer = Arc::new(Producer::builder(&client).acks(Acks::All).build());
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicUsize::new(0));
    let sender = {
        let (producer, topic, stop, acked) =
            (producer.clone(), topic.clone(), stop.clone(), acked.clone());
        tokio::spawn(async move {
            let mut ok = HashMap::new();
            let mut pending = Vec::new();
            let mut id = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let record = ProducerRecord::new(topic.clone()).value(value(id));
                pending.push((id, producer.send(record).await.expect("accepted")));
                id += 1;
                if id.is_multiple_of(20) {
                    for (id, d) in pending.drain(..) {
                        if let Ok(m) = d.await {
                            ok.insert(id, (m.partition, m.offset));
                            acked.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            for (id, d) in pending {
                if let Ok(m) = d.await {
                    ok.insert(id, (m.partition, m.offset));
                }
            }
            ok
        })
    };
    let wait_acked = |n: usize| {
        let acked = acked.clone();
        async move {
            let deadline = tokio::time::Instant::now() + LONG;
            while acked.load(Ordering::Relaxed) < n {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "stalled at {acked:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_acked(500).await;
    let old = cluster.partition_state(&topic, 0).unwrap().leader;
    cluster.node(old).kill();
    cluster
        .wait_for(LONG, |c| {
            let leader = c.partition_state(&topic, 0).unwrap().leader;
            leader >= 0 && leader != old
        })
        .await
        .expect("a new leader is elected");
    let before = acked.load(Ordering::Relaxed);
    wait_acked(before + 500).await;
    stop.store(true, Ordering::Relaxed);
    let acked_ids = sender.await.unwrap();
    producer.flush().await;
    let history = check_history(&client, &topic, 1, &acked_ids, Duration::from_secs(20)).await;
    assert!(history.is_clean(), "{history:?}");
    assert!(history.consumed >= acked_ids.len());
    cluster.shutdown().await;
}
