"""Turn torch.profiler's key averages into plain per-operator statistics (milliseconds, bytes).

torch reports microseconds and keeps them on FunctionEventAvg objects; downstream code wants
JSON with the house units, in the same shape the MXNet parser yields, so one Markdown/compare
layer serves both. The parser reads attributes only, so this module imports no torch and
tests can hand it plain objects.

Each entry: `kind`, `count`, `total_ms` (inclusive CPU time), `avg_ms` (total_ms / count),
`self_ms` (exclusive CPU time), `device_total_ms` / `device_self_ms` (CUDA kernel time; 0 on a
CPU-only run), `cpu_memory_bytes` / `device_memory_bytes` (net allocated inclusive of children)
and `min_ms` / `max_ms`, which key averages do not keep: null, with a reason in `missing`.

With CUDA activity one kernel's time shows three times: in the device self time of the operator
that launched it, in its own device-side row, and within the span of every record_function
range around it (the range's gpu_user_annotation row). `kind` tells the rows apart ("operator",
"device" for a kernel, copy or memset, "range" for either side of a record_function range), and
totals() counts each kernel once, from the device rows, as torch's own table does; ranges are
listed apart from operators, never sorted among them.
"""

from __future__ import annotations

from typing import Dict, Iterable, List

US_PER_MS = 1e3


def _get(event, *names, default=0.0):
    for name in names:
        value = getattr(event, name, None)
        if value is not None:
            return value
    return default


def row_name(event) -> str:
    """The entry an event's row goes to: its key for a host-side row; with " [CUDA]" (its device
    type) for a device-side one. With CUDA activity torch keeps a device-side row beside the
    CPU row of every record_function range (its gpu_user_annotation, device_type CUDA): merged
    by key alone, a range would count twice and average half its time."""
    device_type = getattr(event, "device_type", None)
    kind = getattr(device_type, "name", None) or "CPU"
    return event.key if kind == "CPU" else f"{event.key} [{kind}]"


def row_kind(event) -> str:
    """"range" (a record_function range, either side), "device" (device-side activity) or "operator"."""
    if getattr(event, "is_user_annotation", False):
        return "range"
    return "operator" if (getattr(getattr(event, "device_type", None), "name", None) or "CPU") == "CPU" else "device"


def parse_key_averages(events: Iterable) -> Dict[str, dict]:
    """{operator or range name: statistics} from `profiler.key_averages()`.

    Rows with the same name on the same side (key averages may split them by input shape or
    stack) are merged; device-side rows stay apart (row_name).
    """
    stats: Dict[str, dict] = {}
    for event in events:
        count = int(_get(event, "count", default=0))
        total_ms = float(_get(event, "cpu_time_total")) / US_PER_MS
        entry = stats.setdefault(row_name(event), {
            "kind": row_kind(event), "count": 0, "total_ms": 0.0, "avg_ms": None, "self_ms": 0.0,
            "device_total_ms": 0.0, "device_self_ms": 0.0,
            "cpu_memory_bytes": 0, "device_memory_bytes": 0,
            "min_ms": None, "max_ms": None,
            "missing": {"min_ms": "torch key averages keep no per-call minimum",
                        "max_ms": "torch key averages keep no per-call maximum"},
        })
        entry["count"] += count
        entry["total_ms"] += total_ms
        entry["self_ms"] += float(_get(event, "self_cpu_time_total")) / US_PER_MS
        entry["device_total_ms"] += float(_get(event, "device_time_total", "cuda_time_total")) / US_PER_MS
        entry["device_self_ms"] += float(_get(event, "self_device_time_total", "self_cuda_time_total")) / US_PER_MS
        entry["cpu_memory_bytes"] += int(_get(event, "cpu_memory_usage", default=0))
        entry["device_memory_bytes"] += int(_get(event, "device_memory_usage", "cuda_memory_usage", default=0))
    for entry in stats.values():
        entry["avg_ms"] = entry["total_ms"] / entry["count"] if entry["count"] else None
    return stats


def totals(stats: Dict[str, dict]) -> dict:
    """The profile's time, each thing once: `device_ms` from the device-side rows (not the
    launching operators' device self time, not the ranges' spans), `host_self_ms` from the
    operators' exclusive CPU time."""
    return {"device_ms": sum(e["device_self_ms"] for e in stats.values() if e["kind"] == "device"),
            "host_self_ms": sum(e["self_ms"] for e in stats.values() if e["kind"] == "operator")}


def top(stats: Dict[str, dict], n: int = 30, key: str = "self_ms") -> List[tuple]:
    """The n entries with the largest `key`, as (name, entry) pairs."""
    return sorted(stats.items(), key=lambda item: item[1].get(key) or 0.0, reverse=True)[:n]


def markdown_table(stats: Dict[str, dict], n: int = 30, key: str = "self_ms") -> str:
    """Markdown tables for the profile's .md file: the top n operators and device rows (sorted by
    `key`), then the record_function ranges (a range's time holds its operators': sorted among
    them it would top the list), then the totals."""
    from tabulate import tabulate

    headers = ["Name", "Count", "Total (ms)", "Avg (ms)", "Self (ms)", "Device total (ms)", "Device self (ms)", "CPU mem (bytes)"]
    # without device activity (a CPU run) the device columns were not measured: ---, not 0
    device = any(e["device_total_ms"] for e in stats.values())

    def table(entries: Dict[str, dict]) -> str:
        rows = [[name, e["count"], e["total_ms"], e["avg_ms"], e["self_ms"], e["device_total_ms"] if device else None,
                 e["device_self_ms"] if device else None, e["cpu_memory_bytes"]] for name, e in top(entries, n, key)]
        return tabulate(rows, headers=headers, tablefmt="github", floatfmt=".4g", missingval="---")
    ranges = {name: e for name, e in stats.items() if e["kind"] == "range"}
    parts = [table({name: e for name, e in stats.items() if e["kind"] != "range"})]
    if ranges:
        parts.append("Ranges (record_function; each holds the operators above):\n\n" + table(ranges))
    total = totals(stats)
    parts.append(f"Totals: host self {total['host_self_ms']:.4g} ms"
                 + (f", device {total['device_ms']:.4g} ms (each kernel once)" if device else ""))
    return "\n\n".join(parts)
