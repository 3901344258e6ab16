// The Java client's side of `baton-bench java` (see docs/PERFORMANCE.md): one JVM
// that stays up for all runs, so that its CPU per record is measured warm, as
// Baton's is. Run in source-file mode: `java -cp 'libs/*' BenchClient.java BOOTSTRAP`.
//
// Commands, one a line on stdin (EOF ends the JVM):
//   produce TOPIC N VALUE_SIZE ACKS LINGER_MS BATCH_BYTES MAX_REQUEST BUFFER_BYTES
//   consume TOPIC N
// For each it builds the client and warms it up (a producer sends one record and
// waits for it), prints `ready`, waits for a `go` line, moves N records of
// partition 0, prints `done BYTES RECORDS`, closes the client and prints `closed`. The
// bench reads this JVM's CPU from /proc/<pid>/stat at `go` and at `done`.
// Any failure prints `error MESSAGE` instead.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class BenchClient {
    private static BufferedReader in;
    private static final PrintStream OUT = System.out;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            try {
                switch (w[0]) {
                    case "produce" -> produce(bootstrap, w);
                    case "consume" -> consume(bootstrap, w[1], Long.parseLong(w[2]));
                    default -> throw new IllegalArgumentException("unknown command " + w[0]);
                }
            } catch (Exception e) {
                say("error " + e.toString().replace('\n', ' '));
            }
        }
    }

    private static void say(String s) {
        OUT.println(s);
        OUT.flush();
    }

    private static void awaitGo() throws Exception {
        say("ready");
        String go = in.readLine();
        if (!"go".equals(go)) {
            throw new IllegalStateException("expected go, got " + go);
        }
    }

    private static void produce(String bootstrap, String[] w) throws Exception {
        String topic = w[1];
        long n = Long.parseLong(w[2]);
        int valueSize = Integer.parseInt(w[3]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "bench-java");
        p.put("acks", w[4]);
        p.put("linger.ms", w[5]);
        p.put("batch.size", w[6]);
        p.put("max.request.size", w[7]);
        p.put("buffer.memory", w[8]);
        p.put("enable.idempotence", "false");
        p.put("compression.type", "none");
        p.put("max.in.flight.requests.per.connection", "5");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            // Warm up: metadata and the connection.
            producer.send(new ProducerRecord<>(topic, 0, null, "warm".getBytes())).get();
            byte[] value = new byte[valueSize];
            java.util.Arrays.fill(value, (byte) 'v');
            AtomicLong failed = new AtomicLong();
            AtomicReference<Exception> first = new AtomicReference<>();
            awaitGo();
            for (long i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, value), (md, e) -> {
                    if (e != null) {
                        failed.incrementAndGet();
                        first.compareAndSet(null, e);
                    }
                });
            }
            producer.flush();
            if (failed.get() != 0) {
                throw new IllegalStateException(failed.get() + " of " + n + " failed: " + first.get());
            }
            say("done " + n * valueSize + " " + n);
        }
        say("closed");
    }

    private static void consume(String bootstrap, String topic, long n) throws Exception {
        awaitGo();
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "bench-java");
        p.put("enable.auto.commit", "false");
        p.put("max.partition.fetch.bytes", "1048576");
        p.put("fetch.max.bytes", "52428800");
        p.put("fetch.max.wait.ms", "500");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long got = 0;
        long bytes = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.nanoTime() + Duration.ofMinutes(10).toNanos();
            while (got < n) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    bytes += r.value() == null ? 0 : r.value().length;
                    got++;
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("stalled at " + got + " of " + n);
                }
            }
            say("done " + bytes + " " + got);
        }
        say("closed");
    }
}
