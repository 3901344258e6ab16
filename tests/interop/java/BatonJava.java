// The Java client (kafka-clients) against baton-broker, driven by tests/interop_java.rs; its
// `member` mode also shares groups with Baton's GroupConsumer in tests/apache_kafka.rs.
//
// Usage: java -cp 'target/apache-kafka/libs/*:<classes>' BatonJava <mode> <bootstrap> <args...>
//   produce   <bootstrap> <topic> <codec,...> <count> per codec: one idempotent acks=all producer,
//                                                   <count> records, keys k<i>, values v<i>.<codec>
//   assign    <bootstrap> <topic> <expected>        assign() every partition from the beginning
//   subscribe <bootstrap> <topic> <group> <expected> classic group protocol, commitSync after each poll
//   admin     <bootstrap> <topic> <group>           every AdminClient call of issue 14, section 3
//   member    <bootstrap> <topic> <group> <range|cooperative-sticky> <stopfile>
//                                                   one classic-protocol group member beside Baton's:
//                                                   commitSync after each poll, until <stopfile> exists;
//                                                   live lines `ASSIGNED <p,...>` after each change of
//                                                   its assignment, `LED` each time it runs the group's
//                                                   assignment, `CONSUMED <n>` after each commit
//   auth-check <bootstrap>                          lists topics once; RESULT says whether the client
//                                                   authenticated, or the authentication error
//   txn-produce <bootstrap> <topic> <group> <transactional.id> <count> <commit|abort,...>
//                                                   one transactional producer: per outcome listed, a
//                                                   transaction of <count> records (keys k<i>, values
//                                                   v<i>.<t>.<outcome>) and, by sendOffsetsToTransaction,
//                                                   offset (t+1)*<count> of partition 0 for <group>;
//                                                   then commitTransaction or abortTransaction
//   read-isolated <bootstrap> <topic> <read_committed|read_uncommitted> [<group>]
//                                                   assign() every partition from the beginning up to
//                                                   the end offsets at that isolation level (the last
//                                                   stable offset for read_committed); with <group>, its
//                                                   committed offset of partition 0 (requireStable)
// Each mode prints one line `RESULT {json}` (flat, for the Rust test) and exits 0; any
// exception propagates (exit 1 with its stack trace on stderr).
//
// Security: with INTEROP_SECURITY_PROTOCOL (SASL_SSL), INTEROP_SASL_MECHANISM (PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512), INTEROP_SASL_USERNAME, INTEROP_SASL_PASSWORD and
// INTEROP_SSL_CA (a PEM file) in the environment, every client connects with them
// (ssl.truststore.type=PEM, host name verification on, as by default); otherwise in
// plaintext. The Rust side sets them from baton_testkit::security::ClientSecurity.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class BatonJava {
    static final Duration DEADLINE = Duration.ofSeconds(60);

    public static void main(String[] a) throws Exception {
        switch (a[0]) {
            case "produce" -> produce(a[1], a[2], a[3].split(","), Integer.parseInt(a[4]));
            case "assign" -> consume(a[1], a[2], null, Integer.parseInt(a[3]));
            case "assign-rack" -> {
                rack = a[4];
                consume(a[1], a[2], null, Integer.parseInt(a[3]));
            }
            case "subscribe" -> consume(a[1], a[2], a[3], Integer.parseInt(a[4]));
            case "admin" -> admin(a[1], a[2], a[3]);
            case "member" -> member(a[1], a[2], a[3], a[4], a[5]);
            case "auth-check" -> authCheck(a[1]);
            case "txn-produce" -> txnProduce(a[1], a[2], a[3], a[4], Integer.parseInt(a[5]), a[6].split(","));
            case "read-isolated" -> readIsolated(a[1], a[2], a[3], a.length > 4 ? a[4] : null);
            default -> throw new IllegalArgumentException("unknown mode " + a[0]);
        }
    }

    /// `bootstrap.servers` and the security settings the environment names.
    static Properties base(String bootstrap) {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        String protocol = System.getenv("INTEROP_SECURITY_PROTOCOL");
        if (protocol == null || protocol.equals("PLAINTEXT")) {
            return p;
        }
        String mechanism = System.getenv("INTEROP_SASL_MECHANISM");
        String user = System.getenv("INTEROP_SASL_USERNAME");
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, protocol);
        p.put("sasl.mechanism", mechanism);
        p.put("sasl.jaas.config", switch (mechanism) {
            case "PLAIN" -> "org.apache.kafka.common.security.plain.PlainLoginModule required username=\""
                    + user + "\" password=\"" + System.getenv("INTEROP_SASL_PASSWORD") + "\";";
            default -> "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                    + user + "\" password=\"" + System.getenv("INTEROP_SASL_PASSWORD") + "\";";
        });
        p.put("ssl.truststore.type", "PEM");
        p.put("ssl.truststore.location", System.getenv("INTEROP_SSL_CA"));
        p.put("ssl.endpoint.identification.algorithm", "https");
        return p;
    }

    /// Lists topics once. Prints whether that worked and the authentication error if not.
    static void authCheck(String bootstrap) throws Exception {
        Properties p = base(bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        boolean authenticated = false;
        String error = "";
        try (Admin admin = Admin.create(p)) {
            admin.listTopics().names().get();
            authenticated = true;
        } catch (java.util.concurrent.ExecutionException e) {
            if (!(e.getCause() instanceof org.apache.kafka.common.errors.AuthenticationException)) {
                throw e;
            }
            error = (e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage())
                    .replace('"', '\'').replace('\\', '/');
        }
        System.out.println("RESULT {\"authenticated\": " + authenticated + ", \"auth_error\": \"" + error + "\"}");
    }

    static void produce(String bootstrap, String topic, String[] codecs, int count) throws Exception {
        int acked = 0;
        Set<Integer> partitions = new TreeSet<>();
        for (String codec : codecs) {
            acked += produceWith(bootstrap, topic, codec, count, partitions);
        }
        System.out.println("RESULT {\"acked\": " + acked + ", \"partitions\": " + partitions.size() + "}");
    }

    /// One idempotent acks=all producer with `codec`; returns how many records were acknowledged.
    static int produceWith(String bootstrap, String topic, String codec, int count, Set<Integer> partitions)
            throws Exception {
        Properties p = base(bootstrap);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        int acked = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i + "." + codec)));
            }
            for (var f : sent) {
                RecordMetadata m = f.get(DEADLINE.toSeconds(), TimeUnit.SECONDS);
                partitions.add(m.partition());
                acked++;
            }
        }
        return acked;
    }

    /// One transactional producer: a transaction per entry of `outcomes` ("commit" or
    /// "abort"), each with `count` records and the group offset (t+1)*count of partition 0.
    /// The offsets go with a group's bare metadata (no member, generation -1), as a
    /// producer outside the group's membership sends them.
    @SuppressWarnings("removal") // ConsumerGroupMetadata(String): the group without membership
    static void txnProduce(String bootstrap, String topic, String group, String txnId, int count,
            String[] outcomes) throws Exception {
        Properties p = base(bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(DEADLINE.toMillis()));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        int committed = 0;
        int aborted = 0;
        Set<Integer> partitions = new TreeSet<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            for (int t = 0; t < outcomes.length; t++) {
                producer.beginTransaction();
                List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < count; i++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i + "." + t + "." + outcomes[t])));
                }
                for (var f : sent) {
                    partitions.add(f.get(DEADLINE.toSeconds(), TimeUnit.SECONDS).partition());
                }
                producer.sendOffsetsToTransaction(
                        Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata((t + 1L) * count, "t" + t)),
                        new ConsumerGroupMetadata(group));
                switch (outcomes[t]) {
                    case "commit" -> {
                        producer.commitTransaction();
                        committed += count;
                    }
                    case "abort" -> {
                        producer.abortTransaction();
                        aborted += count;
                    }
                    default -> throw new IllegalArgumentException("unknown outcome " + outcomes[t]);
                }
            }
        }
        System.out.println("RESULT {\"committed\": " + committed + ", \"aborted\": " + aborted
                + ", \"transactions\": " + outcomes.length + ", \"partitions\": " + partitions.size() + "}");
    }

    /// Reads every partition of `topic` from the beginning to its end offsets at `isolation`;
    /// counts the records of committed and of aborted transactions (by their values), and
    /// with `group` fetches its stable committed offset of partition 0.
    static void readIsolated(String bootstrap, String topic, String isolation, String group) throws Exception {
        Properties p = base(bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        int records = 0;
        int fromCommitted = 0;
        int fromAborted = 0;
        int mismatched = 0;
        boolean reachedEnd = false;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = consumer.partitionsFor(topic, DEADLINE).stream()
                    .map(i -> new TopicPartition(topic, i.partition()))
                    .collect(Collectors.toList());
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, DEADLINE);
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (System.nanoTime() < deadline) {
                reachedEnd = tps.stream().allMatch(tp -> consumer.position(tp, DEADLINE) >= end.get(tp));
                if (reachedEnd) {
                    break;
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    records++;
                    String v = r.value();
                    if (r.key() == null || !v.startsWith("v" + r.key().substring(1) + ".")) {
                        mismatched++;
                    } else if (v.endsWith(".commit")) {
                        fromCommitted++;
                    } else if (v.endsWith(".abort")) {
                        fromAborted++;
                    }
                }
            }
        }
        long groupOffset = -1;
        if (group != null) {
            Properties ap = base(bootstrap);
            ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
            try (Admin admin = Admin.create(ap)) {
                OffsetAndMetadata o = admin.listConsumerGroupOffsets(group,
                                new ListConsumerGroupOffsetsOptions().requireStable(true))
                        .partitionsToOffsetAndMetadata().get().get(new TopicPartition(topic, 0));
                groupOffset = o == null ? -1 : o.offset();
            }
        }
        System.out.println("RESULT {\"records\": " + records + ", \"committed_records\": " + fromCommitted
                + ", \"aborted_records\": " + fromAborted + ", \"mismatched\": " + mismatched
                + ", \"reached_end\": " + reachedEnd + ", \"group_offset\": " + groupOffset + "}");
    }

    /// The consumer's `client.rack` (KIP-392) in mode `assign-rack`, else null.
    static String rack = null;

    /// Each partition's preferred read replica, `partition:id,...`, in mode `assign-rack`.
    static String preferred = "";

    /// Reads until `expected` distinct records arrived; every value must match its key.
    /// With a `rack`, the result also names each partition's preferred read replica
    /// as the consumer's `preferred-read-replica` metric has it at the end (-1: the
    /// leader).
    static void consume(String bootstrap, String topic, String group, int expected) {
        Properties p = base(bootstrap);
        if (rack != null) {
            p.put(ConsumerConfig.CLIENT_RACK_CONFIG, rack);
        }
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        }
        Set<String> seen = new HashSet<>();
        int mismatched = 0;
        int records = 0;
        // Per partition and codec, the producer's index i of the last value read: the
        // records of one producer reach a partition in send order.
        Map<String, Integer> lastIndex = new HashMap<>();
        int reordered = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            if (group != null) {
                consumer.subscribe(List.of(topic));
            } else {
                List<TopicPartition> tps = consumer.partitionsFor(topic, DEADLINE).stream()
                        .map(i -> new TopicPartition(topic, i.partition()))
                        .collect(Collectors.toList());
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
            }
            long end = System.nanoTime() + DEADLINE.toNanos();
            while (seen.size() < expected && System.nanoTime() < end) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : batch) {
                    records++;
                    String key = r.key();
                    if (key == null || !r.value().startsWith("v" + key.substring(1) + ".")) {
                        mismatched++;
                    } else {
                        int i = Integer.parseInt(key.substring(1));
                        String codec = r.value().substring(r.value().indexOf('.') + 1);
                        Integer last = lastIndex.put(r.partition() + "/" + codec, i);
                        if (last != null && last >= i) {
                            reordered++;
                        }
                    }
                    seen.add(r.partition() + "/" + r.offset());
                }
                if (group != null && !batch.isEmpty()) {
                    consumer.commitSync();
                }
            }
            if (rack != null) {
                TreeMap<Integer, Long> replicas = new TreeMap<>();
                for (Map.Entry<MetricName, ? extends Metric> m : consumer.metrics().entrySet()) {
                    MetricName n = m.getKey();
                    if (n.name().equals("preferred-read-replica") && topic.equals(n.tags().get("topic"))) {
                        Object v = m.getValue().metricValue();
                        long id = v instanceof Number num ? num.longValue() : -2;
                        replicas.put(Integer.parseInt(n.tags().get("partition")), id);
                    }
                }
                preferred = replicas.entrySet().stream()
                        .map(e -> e.getKey() + ":" + e.getValue())
                        .collect(Collectors.joining(","));
            }
        }
        System.out.println("RESULT {\"distinct\": " + seen.size() + ", \"records\": " + records
                + ", \"mismatched\": " + mismatched + ", \"reordered\": " + reordered
                + ", \"preferred\": \"" + preferred + "\"}");
    }

    /// How many times this member ran the group's assignment.
    static volatile int led = 0;

    /// Kafka's RangeAssignor, saying when this member runs it (as the group's leader).
    public static class LoggingRange extends RangeAssignor {
        @Override
        public GroupAssignment assign(Cluster metadata, GroupSubscription subscriptions) {
            System.out.println("LED");
            led++;
            return super.assign(metadata, subscriptions);
        }
    }

    /// Kafka's CooperativeStickyAssignor, saying when this member runs it.
    public static class LoggingCooperativeSticky extends CooperativeStickyAssignor {
        @Override
        public GroupAssignment assign(Cluster metadata, GroupSubscription subscriptions) {
            System.out.println("LED");
            led++;
            return super.assign(metadata, subscriptions);
        }
    }

    /// A group member until `stopFile` exists. `range` uses the Java default list (range,
    /// then cooperative-sticky), `cooperative-sticky` that assignor alone (both the classic
    /// protocol); `consumer` the consumer rebalance protocol (KIP-848) with the coordinator's
    /// `uniform` assignor. The RESULT names
    /// every record consumed (`partition:offset:value`, space-separated) and the last
    /// assignment; the member commits after each poll and leaves the group on close.
    static void member(String bootstrap, String topic, String group, String strategy, String stopFile) {
        Properties p = base(bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "20000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (strategy.equals("consumer")) {
            // KIP-848: the coordinator assigns (uniform) and sets the session timeout
            // and heartbeat interval, which the client may not configure.
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
            p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, "uniform");
        } else {
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, switch (strategy) {
                case "range" -> LoggingRange.class.getName() + "," + CooperativeStickyAssignor.class.getName();
                case "cooperative-sticky" -> LoggingCooperativeSticky.class.getName();
                default -> throw new IllegalArgumentException("unknown strategy " + strategy);
            });
        }
        StringBuilder consumed = new StringBuilder();
        int records = 0;
        String assigned = "";
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            // Revoked partitions are committed before they move (commitSync is allowed here,
            // inside poll, even while the group rebalances).
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                    if (!revoked.isEmpty()) {
                        consumer.commitSync();
                    }
                }

                public void onPartitionsAssigned(Collection<TopicPartition> added) {}
            });
            long end = System.nanoTime() + Duration.ofSeconds(120).toNanos();
            while (!new java.io.File(stopFile).exists() && System.nanoTime() < end) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : batch) {
                    records++;
                    consumed.append(consumed.length() == 0 ? "" : " ")
                            .append(r.partition()).append(':').append(r.offset()).append(':').append(r.value());
                }
                if (!batch.isEmpty()) {
                    try {
                        consumer.commitSync();
                    } catch (org.apache.kafka.common.errors.RebalanceInProgressException e) {
                        // Cooperative: the rebalance finishes in the next poll, whose
                        // revocation listener (or following commit) commits these.
                    }
                    System.out.println("CONSUMED " + records);
                }
                String now = consumer.assignment().stream().map(TopicPartition::partition).sorted()
                        .map(String::valueOf).collect(Collectors.joining(","));
                if (!now.equals(assigned)) {
                    assigned = now;
                    System.out.println("ASSIGNED " + assigned);
                }
            }
        }
        System.out.println("RESULT {\"records\": " + records + ", \"led\": " + led + ", \"assigned\": \"" + assigned
                + "\", \"consumed\": \"" + consumed + "\"}");
    }

    @SuppressWarnings("removal") // listConsumerGroups is one of the calls under test
    static void admin(String bootstrap, String topic, String group) throws Exception {
        Properties p = base(bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        StringBuilder out = new StringBuilder("RESULT {");
        try (Admin admin = Admin.create(p)) {
            String created = topic + "-admin";
            NewTopic nt = new NewTopic(created, 2, (short) -1)
                    .configs(Map.of("retention.ms", "3600000"));
            admin.createTopics(List.of(nt)).all().get();
            Set<String> names = admin.listTopics().names().get();
            out.append("\"listed_created\": ").append(names.contains(created));
            out.append(", \"listed_existing\": ").append(names.contains(topic));

            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            out.append(", \"described_partitions\": ").append(d.partitions().size());
            out.append(", \"described_replicas\": ").append(d.partitions().get(0).replicas().size());

            DescribeClusterResult c = admin.describeCluster();
            out.append(", \"cluster_nodes\": ").append(c.nodes().get().size());
            out.append(", \"cluster_id\": \"").append(c.clusterId().get()).append('"');
            out.append(", \"controller\": ").append(c.controller().get().id());

            Collection<GroupListing> groups = admin.listGroups().all().get();
            boolean listed = admin.listConsumerGroups().all().get().stream()
                    .anyMatch(g -> g.groupId().equals(group));
            out.append(", \"groups_listed\": ").append(groups.size());
            out.append(", \"group_listed\": ").append(listed);
            ConsumerGroupDescription g = admin.describeConsumerGroups(List.of(group))
                    .describedGroups().get(group).get();
            out.append(", \"group_state\": \"").append(g.groupState()).append('"');
            out.append(", \"group_members\": ").append(g.members().size());
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            long committedSum = committed.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
            out.append(", \"committed_sum\": ").append(committedSum);

            Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
            for (var part : d.partitions()) {
                specs.put(new TopicPartition(topic, part.partition()), OffsetSpec.latest());
            }
            long latestSum = admin.listOffsets(specs).all().get().values().stream()
                    .mapToLong(ListOffsetsResult.ListOffsetsResultInfo::offset).sum();
            out.append(", \"latest_sum\": ").append(latestSum);
            specs.replaceAll((tp, s) -> OffsetSpec.earliest());
            long earliestSum = admin.listOffsets(specs).all().get().values().stream()
                    .mapToLong(ListOffsetsResult.ListOffsetsResultInfo::offset).sum();
            out.append(", \"earliest_sum\": ").append(earliestSum);

            ConfigResource tr = new ConfigResource(ConfigResource.Type.TOPIC, created);
            ConfigResource br = new ConfigResource(ConfigResource.Type.BROKER,
                    String.valueOf(c.controller().get().id()));
            Map<ConfigResource, Config> configs = admin.describeConfigs(List.of(tr, br)).all().get();
            ConfigEntry retention = configs.get(tr).get("retention.ms");
            ConfigEntry cleanup = configs.get(tr).get("cleanup.policy");
            out.append(", \"retention_ms\": \"").append(retention.value()).append('"');
            out.append(", \"retention_source\": \"").append(retention.source()).append('"');
            out.append(", \"cleanup_policy\": \"").append(cleanup.value()).append('"');
            out.append(", \"cleanup_source\": \"").append(cleanup.source()).append('"');
            ConfigEntry brokerId = configs.get(br).get("node.id");
            out.append(", \"broker_node_id\": \"").append(brokerId == null ? null : brokerId.value()).append('"');
            out.append(", \"broker_configs\": ").append(configs.get(br).entries().size());

            admin.deleteTopics(List.of(created)).all().get();
            boolean gone = false;
            for (int i = 0; i < 50 && !gone; i++) {
                gone = !admin.listTopics().names().get().contains(created);
                if (!gone) {
                    Thread.sleep(100);
                }
            }
            out.append(", \"deleted\": ").append(gone);
        }
        System.out.println(out.append('}'));
    }
}
