import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The topologies of tests/integration/test_streams_group_java_parity.py, as a streams group member
 * (group.protocol=streams). Arguments: bootstrap servers, application id, source topics (comma-separated),
 * sink topic, state directory, application.server (host:port), topology ("word-count", "windowed" or
 * "count"), optionally the group protocol ("streams", the default, or "classic": bench/streams_group_scaleout.py).
 * The environment variable STREAMS_GROUP_PEER_CONFIG adds StreamsConfig settings ("key=value,key=value", e.g.
 * processing.guarantee=exactly_once_v2: tests/integration/test_streams_group_mixed.py's kill -9 tests).
 * Prints "STATE <new state>" on each change, "TASKS <state> <active task ids>" whenever its active tasks
 * or state change (polled every 20 ms) and "RESTORED <changelog partition> <store> <records>" when a store's
 * restoration ends; closes when its standard input ends (the test's handle on it).
 */
public final class StreamsGroupPeer {
    public static void main(final String[] args) throws Exception {
        final Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.APPLICATION_SERVER_CONFIG, args[5]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args.length > 7 ? args[7] : "streams");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        final String extra = System.getenv().getOrDefault("STREAMS_GROUP_PEER_CONFIG", "");
        for (final String setting : extra.split(",")) {
            if (!setting.isBlank()) {
                final String[] pair = setting.split("=", 2);
                props.put(pair[0].trim(), pair[1].trim());
            }
        }

        final StreamsBuilder builder = new StreamsBuilder();
        final String[] sources = args[2].split(",");
        final Topology topology;
        if ("word-count".equals(args[6])) {
            wordCount(builder, sources[0], args[3]);
            topology = builder.build();
        } else if ("windowed".equals(args[6])) {
            windowed(builder, sources[0], sources[1], sources[2], args[3]);
            topology = builder.build();
        } else if ("count".equals(args[6])) {
            topology = count(sources[0], args[3]);
        } else {
            throw new IllegalArgumentException("unknown topology " + args[6]);
        }

        final KafkaStreams streams = new KafkaStreams(topology, props);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
        });
        streams.setGlobalStateRestoreListener(new PrintedRestores());
        streams.setUncaughtExceptionHandler(error -> {
            error.printStackTrace();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        final Thread tasks = new Thread(() -> printTasks(streams));
        tasks.setDaemon(true);
        tasks.start();
        while (System.in.read() != -1) {
            // the test closes our standard input to stop us
        }
        streams.close(Duration.ofSeconds(30));
        System.out.println("CLOSED");
        System.out.flush();
    }

    /** Prints "TASKS <state> <sorted active task ids>" each time they change, until the process ends. */
    static void printTasks(final KafkaStreams streams) {
        String last = "";
        while (true) {
            final KafkaStreams.State state = streams.state();
            final java.util.TreeSet<String> ids = new java.util.TreeSet<>();
            try {
                streams.metadataForLocalThreads().forEach(t -> t.activeTasks().forEach(a -> ids.add(a.taskId().toString())));
            } catch (final RuntimeException notRunning) {
                // metadataForLocalThreads refuses in some states: no tasks then
            }
            final String line = "TASKS " + state + " " + String.join(",", ids);
            if (!line.equals(last)) {
                System.out.println(line);
                System.out.flush();
                last = line;
            }
            try {
                Thread.sleep(20);
            } catch (final InterruptedException stop) {
                return;
            }
        }
    }

    /** Words of the source's lines counted (a repartition topic and a key-value store's changelog). */
    static void wordCount(final StreamsBuilder builder, final String source, final String sink) {
        builder.stream(source, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\s+")))
            .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .to(sink, Produced.with(Serdes.String(), Serdes.Long()));
    }

    /**
     * tests/integration/apps/counting_app.py's topology: each record increments its key's count in the logged
     * key-value store "counts" and (key, count) goes to the sink, so a key's outputs are 1, 2, 3, ...
     */
    static Topology count(final String source, final String sink) {
        return new Topology()
            .addSource("SOURCE", Serdes.String().deserializer(), Serdes.ByteArray().deserializer(), source)
            .addProcessor("COUNT", CountProcessor::new, "SOURCE")
            .addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("counts"), Serdes.String(),
                Serdes.Long()), "COUNT")
            .addSink("SINK", sink, Serdes.String().serializer(), Serdes.Long().serializer(), "COUNT");
    }

    /** count[key] += 1, then forward (key, count). */
    static final class CountProcessor implements Processor<String, byte[], String, Long> {
        private ProcessorContext<String, Long> context;
        private KeyValueStore<String, Long> store;

        @Override
        public void init(final ProcessorContext<String, Long> context) {
            this.context = context;
            this.store = context.getStateStore("counts");
        }

        @Override
        public void process(final Record<String, byte[]> record) {
            final Long before = store.get(record.key());
            final long count = (before == null ? 0L : before) + 1;
            store.put(record.key(), count);
            context.forward(record.withValue(count));
        }
    }

    /** Prints "RESTORED <changelog partition> <store> <records>" when a store's restoration ends. */
    static final class PrintedRestores implements StateRestoreListener {
        @Override
        public void onRestoreStart(final TopicPartition partition, final String store, final long start, final long end) {
        }

        @Override
        public void onBatchRestored(final TopicPartition partition, final String store, final long end, final long n) {
        }

        @Override
        public void onRestoreEnd(final TopicPartition partition, final String store, final long total) {
            System.out.println("RESTORED " + partition + " " + store + " " + total);
            System.out.flush();
        }
    }

    /** Window, session and join window stores, a co-partitioned join and a versioned table. */
    static void windowed(final StreamsBuilder builder, final String left, final String right, final String table,
                         final String sink) {
        final KStream<String, String> lefts = builder.stream(left, Consumed.with(Serdes.String(), Serdes.String()));
        final KStream<String, String> rights = builder.stream(right, Consumed.with(Serdes.String(), Serdes.String()));
        lefts.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(10))).count();
        lefts.groupByKey().windowedBy(SessionWindows.ofInactivityGapWithNoGrace(Duration.ofSeconds(5))).count();
        lefts.join(rights, (l, r) -> l + r, JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofSeconds(1)))
            .to(sink, Produced.with(Serdes.String(), Serdes.String()));
        builder.table(table, Consumed.with(Serdes.String(), Serdes.String()),
            Materialized.as(Stores.persistentVersionedKeyValueStore("versioned", Duration.ofHours(1))));
    }
}
