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
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The word count of tests/integration/test_streams_group_java_parity.py, as a streams group member
 * (group.protocol=streams). Arguments: bootstrap servers, application id, source topic, sink topic,
 * state directory, application.server (host:port). Prints "STATE <new state>" on each change; closes
 * when its standard input ends (the test's handle on it).
 */
public final class StreamsGroupWordCount {
    public static void main(final String[] args) throws Exception {
        final Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.APPLICATION_SERVER_CONFIG, args[5]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);

        final StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\s+")))
            .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

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
        while (System.in.read() != -1) {
            // the test closes our standard input to stop us
        }
        streams.close(Duration.ofSeconds(30));
        System.out.println("CLOSED");
        System.out.flush();
    }
}
