"""`python -m streams_core.broker --port P --data-dir D`: one local Kafka broker in the foreground."""

import sys

from streams_core.broker.cli import main

sys.exit(main())
