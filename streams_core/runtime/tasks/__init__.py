"""Tasks and what runs them: StreamTask, TaskManager, PartitionGroup, RecordQueue, the collector, the guarantee."""
