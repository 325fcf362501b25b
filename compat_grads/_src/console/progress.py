"""Progress of a long command-line run: a live tqdm bar when the stream is a terminal, a
heartbeat line every few seconds when it is not (a CI log, a pipe), nothing when quiet.

Work comes in parts that advance on their own (the TF1 process and this one's TF2 routes):
`advance(part, current)` may be called from any thread.
"""

from __future__ import annotations

import threading
import time


class Progress:
    """Counts `totals[part]` steps per part; shows them on `stream` until closed.

    Args:
      label: what the first word of each heartbeat line is (the command).
      totals: {part name: number of steps}, in display order.
      stream: where to write (the real standard error).
      enabled: False for `--quiet`: nothing is shown.
      interval: seconds between heartbeat lines on a stream that is not a terminal.
    """

    def __init__(self, label: str, totals: dict, stream, *, enabled=True, interval=5.0):
        self.label, self.totals, self.stream = label, dict(totals), stream
        self.done = dict.fromkeys(totals, 0)
        self.current = ""
        self._interval = interval
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._bar = None
        self._ticker = None
        if not enabled:
            return
        if _is_terminal(stream):
            from tqdm import tqdm

            # tqdm's own estimate assumes one steady rate; the parts run at their own.
            self._bar = tqdm(total=sum(self.totals.values()), file=stream, desc=label,
                             dynamic_ncols=True, leave=False, mininterval=0.2,
                             bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}"
                                        " [{elapsed}{postfix}]")
            interval = 1.0  # the bar's clock keeps moving even while one item is slow
        self._ticker = threading.Thread(target=self._tick, args=(interval,), daemon=True)
        self._ticker.start()

    def advance(self, part: str, current: str = "") -> None:
        with self._lock:
            self.done[part] += 1
            self.current = current or self.current
            if self._bar is not None:
                self._bar.set_postfix_str(self._postfix(), refresh=False)
                self._bar.update(1)

    def show(self, current: str) -> None:
        """Names the step now under way (without counting one)."""
        with self._lock:
            self.current = current

    def heartbeat(self) -> str:
        """One line: steps done of all, per part, elapsed and estimated time left."""
        done, total = sum(self.done.values()), sum(self.totals.values())
        return (f"{self.label}: {done} of {total} done, {self._elapsed():.0f} s elapsed"
                f"{self._left()} ({self._parts()}){self._now()}")

    def _elapsed(self) -> float:
        return time.monotonic() - self._start

    def _left(self) -> str:
        """The slowest part's time left at its own pace so far ("" before every part has
        finished a step)."""
        unfinished = [p for p, n in self.totals.items() if self.done[p] < n]
        if not unfinished or any(self.done[p] == 0 for p in unfinished):
            return ""
        pace = max((self.totals[p] - self.done[p]) / self.done[p] for p in unfinished)
        return f", about {self._elapsed() * pace:.0f} s left"

    def _parts(self) -> str:
        return ", ".join(f"{p} {self.done[p]}/{n}" for p, n in self.totals.items())

    def _now(self) -> str:
        return f"; now {self.current}" if self.current else ""

    def _postfix(self) -> str:
        """The bar's tail (tqdm puts it after the elapsed time and a comma)."""
        return f"{self._left()[2:] or 'estimating'}; {self._parts()}{self._now()}"

    def _tick(self, interval):
        while not self._stop.wait(interval):
            with self._lock:
                if self._bar is not None:
                    self._bar.set_postfix_str(self._postfix(), refresh=False)
                    self._bar.refresh()
                else:
                    print(self.heartbeat(), file=self.stream, flush=True)

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self._bar is not None:
            self._bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
