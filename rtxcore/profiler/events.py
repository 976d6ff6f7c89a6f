"""The profile's results: one ``FunctionEvent`` per recorded range, their sums per
key (``FunctionEventAvg``), and the ``EventList`` of either that prints as
PyTorch's table.
"""

from __future__ import annotations

from typing import Any, Iterable


class FunctionEvent:
    """One recorded range. Times are in microseconds, as in PyTorch."""

    __slots__ = ("name", "kind", "device", "input_shapes", "start_ns", "end_ns", "children_ns",
                 "parent", "thread", "device_ns", "device_total_ns", "device_spans", "id")

    def __init__(self, name: str, kind: str, device: str, input_shapes: Any,
                 parent: "FunctionEvent | None", thread: int) -> None:
        self.name = name
        self.kind = kind  # "op", "kernel", "backward", "optimizer", "user"
        self.device = device
        self.input_shapes = input_shapes
        self.parent = parent
        self.thread = thread
        self.start_ns = 0
        self.end_ns = 0
        self.children_ns = 0  # host time of the events directly inside this one
        self.device_ns = 0  # device time of the kernels this event launched itself
        self.device_total_ns = 0  # ... and of those launched by events inside it
        self.device_spans: list[tuple[str, int, int]] | None = None
        self.id = 0

    key = property(lambda self: self.name)
    count = property(lambda self: 1)
    cpu_time_total = property(lambda self: (self.end_ns - self.start_ns) / 1e3)
    self_cpu_time_total = property(lambda self: (self.end_ns - self.start_ns - self.children_ns) / 1e3)
    cpu_time = cpu_time_total
    self_cpu_time = self_cpu_time_total
    device_time_total = property(lambda self: self.device_total_ns / 1e3)
    self_device_time_total = property(lambda self: self.device_ns / 1e3)
    device_time = device_time_total

    @property
    def time_range(self) -> tuple[float, float]:
        return self.start_ns / 1e3, self.end_ns / 1e3

    def __repr__(self) -> str:
        return (f"<FunctionEvent {self.name} device={self.device} "
                f"cpu_time_total={self.cpu_time_total:.3f}us>")


class FunctionEventAvg:
    """The events of one key (name, and input shapes when grouped by them) added up."""

    def __init__(self, key: str, input_shapes: Any = None) -> None:
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.devices: set[str] = set()

    def add(self, ev: FunctionEvent) -> None:
        self._sum(ev, 1)
        if ev.device:
            self.devices.add(ev.device)

    def _sum(self, e: Any, count: int) -> None:
        """Add ``e``'s times (an event's, or another sum's) and ``count`` calls."""
        self.count += count
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        self.device_time_total += e.device_time_total
        self.self_device_time_total += e.self_device_time_total

    # per call: a total over the count (0 for none)
    cpu_time = property(lambda self: self._per_call(self.cpu_time_total))
    self_cpu_time = property(lambda self: self._per_call(self.self_cpu_time_total))
    device_time = property(lambda self: self._per_call(self.device_time_total))
    self_device_time = property(lambda self: self._per_call(self.self_device_time_total))

    def _per_call(self, total: float) -> float:
        return total / self.count if self.count else 0.0

    # PyTorch's older CUDA-named spellings of the device times
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_time = property(lambda self: self.device_time)

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} count={self.count} "
                f"cpu_time_total={self.cpu_time_total:.3f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us>")


_SORT_KEYS = ("cpu_time_total", "self_cpu_time_total", "cpu_time", "self_cpu_time", "count",
              "device_time_total", "self_device_time_total", "device_time", "self_device_time",
              "cuda_time_total", "self_cuda_time_total", "cuda_time")


class EventList(list):
    """A list of events (or of averages, from ``key_averages``) that prints as a table."""

    def __init__(self, items: Iterable[Any] = (), device_label: str = "") -> None:
        super().__init__(items)
        self._device_label = device_label

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80,
              header: str | None = None, top_level_events_only: bool = False) -> str:
        """The rows as text, like PyTorch's ``key_averages().table()``: sorted by
        ``sort_by`` (largest first; None keeps the order), at most ``row_limit``
        rows (``<= 0``: all), percentages of the total self time."""
        return _table(self, sort_by, row_limit, max_name_column_width, max_shapes_column_width,
                      header, self._device_label, top_level_events_only)

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg("Total")
        for e in self:
            total._sum(e, e.count)
        return total

    def __str__(self) -> str:
        return self.table()


# -- the table ---------------------------------------------------------------------------


def _fmt_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _fmt_pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole else "0.00%"


def _table(rows: list[Any], sort_by: str | None, row_limit: int, name_width: int,
           shapes_width: int, header: str | None, device_label: str,
           top_level_only: bool) -> str:
    if sort_by is not None and sort_by not in _SORT_KEYS:
        raise ValueError(f"table(): sort_by={sort_by!r} is not a column; use one of "
                         + ", ".join(_SORT_KEYS))
    if top_level_only:
        rows = [r for r in rows if getattr(r, "parent", None) is None]
    self_cpu_total = sum(r.self_cpu_time_total for r in rows)
    self_dev_total = sum(r.self_device_time_total for r in rows)
    if sort_by is not None:
        rows = sorted(rows, key=lambda r: getattr(r, sort_by), reverse=True)
    if row_limit > 0:
        rows = rows[:row_limit]
    shapes = any(r.input_shapes is not None for r in rows)
    dev = bool(device_label)
    name_w = min(max([len("Name")] + [len(r.key) for r in rows]) + 2, max(name_width, 8))
    cols = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if dev:
        cols += [f"Self {device_label}", f"Self {device_label} %", f"{device_label} total",
                 f"{device_label} time avg"]
    cols.append("# of Calls")
    widths = [name_w] + [max(12, len(c) + 2) for c in cols]
    heads = ["Name"] + cols
    if shapes:
        widths.append(min(shapes_width, max([len("Input Shapes")] +
                                            [len(str(r.input_shapes)) for r in rows])))
        heads.append("Input Shapes")
    sep = "  ".join("-" * n for n in widths)

    def line(cells: list[str]) -> str:
        parts = [cells[0][:name_w - 3] + "..." if len(cells[0]) > name_w else cells[0]]
        parts[0] = parts[0].ljust(name_w)
        for c, n in zip(cells[1:], widths[1:]):
            parts.append((c[:n - 3] + "..." if len(c) > n else c).rjust(n))
        return "  ".join(parts)

    out = []
    if header:
        out.append("-" * len(sep))
        out.append(header)
    out += [sep, line(heads), sep]
    for r in rows:
        cells = [r.key, _fmt_pct(r.self_cpu_time_total, self_cpu_total),
                 _fmt_time(r.self_cpu_time_total), _fmt_pct(r.cpu_time_total, self_cpu_total),
                 _fmt_time(r.cpu_time_total), _fmt_time(r.cpu_time_total / max(r.count, 1))]
        if dev:
            cells += [_fmt_time(r.self_device_time_total),
                      _fmt_pct(r.self_device_time_total, self_dev_total),
                      _fmt_time(r.device_time_total),
                      _fmt_time(r.device_time_total / max(r.count, 1))]
        cells.append(str(r.count))
        if shapes:
            cells.append(str(r.input_shapes))
        out.append(line(cells))
    out.append(sep)
    out.append(f"Self CPU time total: {_fmt_time(self_cpu_total)}")
    if dev:
        out.append(f"Self {device_label} time total: {_fmt_time(self_dev_total)}")
    return "\n".join(out) + "\n"
