import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.Stores;

/**
 * The topologies of tests/integration/test_streams_group_java_parity.py, as a streams group member
 * (group.protocol=streams). Arguments: bootstrap servers, application id, source topics (comma-separated),
 * sink topic, state directory, application.server (host:port), topology ("word-count" or "windowed"),
 * optionally the group protocol ("streams", the default, or "classic": bench/streams_group_scaleout.py).
 * Prints "STATE <new state>" on each change and "TASKS <state> <active task ids>" whenever its active tasks
 * or state change (polled every 20 ms); closes when its standard input ends (the test's handle on it).
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

        final StreamsBuilder builder = new StreamsBuilder();
        final String[] sources = args[2].split(",");
        if ("word-count".equals(args[6])) {
            wordCount(builder, sources[0], args[3]);
        } else if ("windowed".equals(args[6])) {
            windowed(builder, sources[0], sources[1], sources[2], args[3]);
        } else {
            throw new IllegalArgumentException("unknown topology " + args[6]);
        }

        final KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
        });
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
