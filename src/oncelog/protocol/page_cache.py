"""Bring a response's file ranges into the page cache off the event loop.

``os.sendfile`` on the event loop is cheap only while the pages it sends are resident.
A range that is not (a consumer catching up on old data, or pages the kernel reclaimed:
on hosts with proactive reclaim, such as DAMON's ``pageout`` of cold file pages, data
untouched for about a minute is gone) makes sendfile read the disk synchronously, one
small readahead window at a time, and the whole loop, with every other client, waits on
the disk meanwhile. Kafka has the same trap (its network threads block in sendfile,
KAFKA-7504).

So before a response is sent, ``PageWarmer.ready`` probes its ranges without blocking
(``preadv`` with ``RWF_NOWAIT``, one byte every ``stride``; a miss answers EAGAIN at
once). Resident ranges go straight on. Cold ones are read into the cache by a small
thread pool: one ``POSIX_FADV_WILLNEED`` over the range (the disk gets large requests,
not 128 KB ones) plus the same length again past it, where a sequential consumer's next
fetch starts, then a sendfile of the range to /dev/null that waits for the pages. The loop serves other
clients while that happens, and the sendfile that follows finds the pages in memory.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Iterable
from concurrent.futures import Executor

from oncelog.protocol.response_frame import FileRange

# One probe per this many bytes, plus the range's last byte. Reclaim works on whole
# regions of pages (LRU lists, DAMON regions of megabytes), so a sparse probe finds a
# cold range; at ~2 µs a probe this costs under 10 ms of CPU per GB served.
PROBE_STRIDE = 256 << 10
# Past a cold range, this much more is advised for the next sequential fetch.
MAX_READ_AHEAD = 32 << 20


def _supported() -> bool:
    return all(hasattr(os, name) for name in ("preadv", "RWF_NOWAIT", "posix_fadvise"))


class PageWarmer:
    """Makes responses' file ranges resident before the loop sends them (see module doc).

    ``executor`` runs the blocking reads; the broker owns it and shuts it down."""

    def __init__(self, executor: Executor, stride: int = PROBE_STRIDE) -> None:
        self.executor = executor
        self.stride = stride
        self.enabled = _supported()
        self._probe = bytearray(1)
        self.cold_bytes = 0  # bytes found cold and read in (metrics, tests)
        self.cold_ranges = 0

    def cold(self, r: FileRange) -> bool:
        """True if a probed page of the range is not in the page cache. A probe that
        misses also starts the kernel's own readahead there."""
        if not self.enabled or r.length <= 0:
            return False
        probe = [self._probe]
        end = r.position + r.length
        position = r.position
        try:
            while True:
                if os.preadv(r.fd, probe, position, os.RWF_NOWAIT) <= 0:
                    return False  # past the end of the file: sendfile will say so
                if position == end - 1:
                    return False
                position = min(position + self.stride, end - 1)
        except BlockingIOError:
            return True
        except OSError:
            # EOPNOTSUPP and the like: a file system without non-blocking reads. Stop
            # probing; sendfile behaves as before.
            self.enabled = False
            return False

    async def ready(self, ranges: Iterable[FileRange]) -> None:
        """Return once every cold range among ``ranges`` was read into the cache."""
        if not self.enabled:
            return
        cold = [r for r in ranges if self.cold(r)]
        if not cold:
            return
        loop = asyncio.get_running_loop()
        waits = []
        for r in cold:
            self.cold_bytes += r.length
            self.cold_ranges += 1
            # The job owns its own descriptor: the response (and its range's descriptor)
            # may be dropped while the read runs, if the client goes away.
            fd = os.dup(r.fd)
            ahead = min(r.length, MAX_READ_AHEAD)
            waits.append(loop.run_in_executor(self.executor, warm, fd, r.position, r.length, ahead))
        await asyncio.gather(*waits)


def warm(fd: int, position: int, length: int, ahead: int) -> None:
    """Read ``length`` bytes at ``position`` into the page cache, advising ``ahead``
    more; closes ``fd``. Runs in a worker thread. The read is a sendfile to /dev/null:
    the kernel fills the page cache and copies nothing out to this process."""
    try:
        os.posix_fadvise(fd, position, length + ahead, os.POSIX_FADV_WILLNEED)
        end = position + length
        while position < end:
            n = os.sendfile(_null(), fd, position, end - position)
            if n <= 0:
                break  # a shorter file: the response's own send reports it
            position += n
    except OSError:
        pass  # the send that follows reads the same range and reports any real error
    finally:
        os.close(fd)


@functools.cache
def _null() -> int:
    """One /dev/null descriptor for the process, shared by every worker thread."""
    return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
