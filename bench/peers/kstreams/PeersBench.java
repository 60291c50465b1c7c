import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The bench/peers workloads on Kafka Streams: pass-through (bytes), word count, windowed count.
 * Runs until SIGTERM (the harness stops it once its output is complete), then closes cleanly.
 *
 * Args: bootstrap appId input output workload(passthrough|wc|windowed) cacheBytes stateDir commitMs
 */
public final class PeersBench {
    public static void main(String[] args) throws InterruptedException {
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3], workload = args[4];
        long cacheBytes = Long.parseLong(args[5]);
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[6]);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(args[7]));
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, cacheBytes);
        props.put(StreamsConfig.producerPrefix(ProducerConfig.ACKS_CONFIG), "all");
        props.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 100);
        props.put(StreamsConfig.producerPrefix(ProducerConfig.BATCH_SIZE_CONFIG), 16384);
        props.put(StreamsConfig.producerPrefix(ProducerConfig.COMPRESSION_TYPE_CONFIG), "none");
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        if (workload.equals("passthrough")) {
            builder.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                .to(output, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        } else {
            KGroupedStream<String, String> words = builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split(" ")))
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()));
            if (workload.equals("wc")) {
                words.count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                    .toStream()
                    .mapValues(count -> Long.toString(count))
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
            } else if (workload.equals("windowed")) {
                words.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(10)))
                    .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("windowed-counts"))
                    .toStream()
                    .map((window, count) -> KeyValue.pair(window.key() + "@" + window.window().start(), Long.toString(count)))
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
            } else {
                throw new IllegalArgumentException("unknown workload " + workload);
            }
        }
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }
}
