"""The process's young-generation GC threshold while stream threads run (`python.gc.gen0.threshold`).

Python starts a young collection after 700 more container objects were allocated than freed.
A stream thread holds each fetched batch (thousands of record objects) at once, so at 700 the
collector runs about once per batch and pushes the buffered records into the older generations,
whose collections then rescan them and everything the process imported: about a tenth of the
CPU of a word count or a pass-through (bench/LOG.md, "Young collections"). A higher threshold
lets a batch be processed and freed between collections. It is a process-wide setting, so it
is only ever raised, once per process, when its first stream thread starts.
"""

from __future__ import annotations

import gc
import logging

__all__ = ["raise_gen0_threshold"]

log = logging.getLogger(__name__)


def raise_gen0_threshold(threshold: int) -> bool:
    """Raise the young-generation threshold to `threshold`; True when it changed.

    0 leaves the process's settings alone, and so does a threshold already at least as high
    (set by the application, or by an earlier stream thread). The older generations' thresholds
    stay as they are.
    """
    current = gc.get_threshold()
    if threshold <= 0 or current[0] >= threshold:
        return False
    gc.set_threshold(threshold, *current[1:])
    log.info("young-generation GC threshold raised from %d to %d (python.gc.gen0.threshold)", current[0], threshold)
    return True
