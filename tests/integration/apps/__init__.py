"""Small runnable Kafka Streams applications for integration tests run as real processes.

`python -m tests.integration.apps.counting_app ...` (from the repository root) runs one; the
tests start them with `subprocess.Popen`, kill them with SIGKILL and restart them
(`harness.py` holds the process and Kafka helpers the tests share).
"""
