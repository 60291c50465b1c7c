"""Worker processes (`stream.threads.mode=process`): the process, the instance's handle, the channel, logs, queries."""
