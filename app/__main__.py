"""`python -m app wordcount ...` runs the word-count service; `python -m app demo` the local demo."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from app.logs import LOG_FORMATS, configure_logging
from app.settings import add_service_arguments, settings_from


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    wordcount = commands.add_parser("wordcount", help="the word-count service with its REST server")
    add_service_arguments(wordcount, application_id="wordcount")
    wordcount.add_argument("--engine", choices=["asyncio", "spark"], default="asyncio",
                           help="asyncio: the service with its REST server; spark: the same topology on Spark")
    wordcount.add_argument("--input-topic", default="TextLinesTopic")
    wordcount.add_argument("--output-topic", default="WordsWithCountsTopic")
    wordcount.add_argument("--max-offsets-per-trigger", type=int, default=None,
                           help="--engine spark: at most this many input records per micro-batch")
    wordcount.add_argument("--spark-master", default=None,
                           help="Spark master URL for --engine spark (default local[*]; spark-submit's own when submitted)")
    demo = commands.add_parser("demo", help="local broker, two word-count instances, sample text, curl lines")
    demo.add_argument("--once", action="store_true", help="exit after showing the first answers")
    demo.add_argument("--base-port", type=int, default=7071)
    demo.add_argument("--screenshot", type=Path, metavar="PNG", help="save a screenshot of the dashboard, then stop")
    parser.add_argument("--log-level", default=os.environ.get("STREAMS_LOG_LEVEL") or "INFO")
    parser.add_argument("--log-format", default=os.environ.get("STREAMS_LOG_FORMAT") or "text", choices=LOG_FORMATS,
                        help="text, or json: one object a line for log stacks (STREAMS_LOG_FORMAT)")
    args = parser.parse_args(argv)
    if args.log_format not in LOG_FORMATS:  # argparse does not check a default taken from the environment
        parser.error(f"argument --log-format: invalid choice: {args.log_format!r} (choose from {', '.join(LOG_FORMATS)})")
    configure_logging(args.log_level, args.log_format)
    if args.command == "wordcount" and args.engine == "spark":
        from app.spark_job import run_spark_wordcount

        logging.getLogger("py4j").setLevel(logging.WARNING)
        return run_spark_wordcount(settings_from(args), args.autostop, args.spark_master, args.input_topic,
                                   args.output_topic, args.max_offsets_per_trigger)
    if args.command == "wordcount":
        from app.service import run_service
        from app.wordcount import build_topology

        topics = (args.input_topic, args.output_topic)
        return run_service(settings_from(args), lambda: build_topology(*topics), dict.fromkeys(topics, 4))
    from app.demo import run_demo

    return run_demo(base_port=args.base_port, once=args.once, screenshot=args.screenshot)


if __name__ == "__main__":
    sys.exit(main())
