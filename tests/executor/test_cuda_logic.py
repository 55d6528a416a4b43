"""The pure logic of the executor's CUDA-only code, checked on the CPU with ``torch.cuda`` stubbed out:
which device is selected, and where the timer's events are recorded relative to the timed work. The
stubs record calls; no CUDA kernel runs (the CUDA tests themselves skip without a device)."""

from __future__ import annotations

import pytest
import torch

from optsched.executor import calibrate


class _Stream:
    def __init__(self, device) -> None:
        self.device = device


class _Event:
    """A CUDA event stub: ``record`` notes the position in the shared log; elapsed time in ms is the
    difference of the log positions (so the timer's result says what ran between its two events)."""

    def __init__(self, log: list, enable_timing: bool = False) -> None:
        assert enable_timing
        self.log, self.at, self.stream, self.synced = log, None, None, False

    def record(self, stream) -> None:
        self.at, self.stream = len(self.log), stream
        self.log.append("record")

    def synchronize(self) -> None:
        self.synced = True
        self.log.append("sync")

    def elapsed_time(self, end) -> float:
        return float(end.at - self.at)


@pytest.fixture
def stub_cuda(monkeypatch):
    """``torch.cuda`` with set_device's C call, current_stream and Event stubbed; set_device itself stays
    torch's own (its argument check is what refuses a device without an index)."""
    calls: dict = {"set": [], "log": [], "events": []}
    monkeypatch.setattr(torch._C, "_cuda_setDevice", lambda i: calls["set"].append(i), raising=False)
    monkeypatch.setattr(torch.cuda, "_lazy_init", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: _Stream(device))

    def event(enable_timing=False):
        e = _Event(calls["log"], enable_timing)
        calls["events"].append(e)
        return e

    monkeypatch.setattr(torch.cuda, "Event", event)
    return calls


def test_select_cuda_device_with_and_without_an_index(stub_cuda):
    calibrate.select_cuda_device("cuda:1")
    calibrate.select_cuda_device(torch.device("cuda:0"))
    assert stub_cuda["set"] == [1, 0]
    calibrate.select_cuda_device("cuda")  # the current device: set_device would raise ValueError on it
    assert stub_cuda["set"] == [1, 0]
    with pytest.raises(ValueError, match="not a CUDA device"):
        calibrate.select_cuda_device("cpu")


def test_torch_refuses_set_device_without_an_index():
    """Why "cuda" is not passed to set_device: torch raises before touching the driver."""
    with pytest.raises(ValueError, match="specified index"):
        torch.cuda.set_device(torch.device("cuda"))


@pytest.mark.parametrize("device, selected", [("cuda", []), ("cuda:1", [1])])
def test_cuda_timer_events_bracket_the_work_on_the_device_stream(stub_cuda, device, selected):
    t = calibrate.timer(torch.device(device))
    assert stub_cuda["set"] == selected

    def work() -> None:
        stub_cuda["log"].extend(["kernel"] * 3)

    sec = t(work)
    start, end = stub_cuda["events"]
    assert stub_cuda["log"] == ["record", "kernel", "kernel", "kernel", "record", "sync"]
    assert sec == 4 / 1e3  # elapsed_time is ms: the stub's 4 positions between the two records
    assert end.synced and not start.synced  # the host waits for the end event only, after the work
    assert start.stream.device == end.stream.device == torch.device(device)


class _SideStream:
    """A CUDA stream stub for the host tier: notes what is waited on and recorded, in the shared log."""

    def __init__(self, log: list, name: str) -> None:
        self.log, self.name = log, name

    def wait_stream(self, other) -> None:
        self.log.append(f"{self.name} waits {other.name}")

    def wait_event(self, event) -> None:
        self.log.append(f"{self.name} waits event {event.at}")


def test_host_tier_copies_on_the_side_stream_order_and_timing(monkeypatch):
    """HostTier's CUDA branch on CPU tensors with the CUDA calls stubbed: every copy waits for the compute
    stream, is bracketed by two events on the side stream, the compute stream waits for the end event,
    and the seconds are the events' elapsed times, collected when read (no host wait per copy)."""
    from contextlib import nullcontext

    from optsched.executor.host_tier import HostTier
    from optsched.executor.kv_pool import PagedKVPool

    log: list = []
    comp, side = _SideStream(log, "compute"), _SideStream(log, "side")
    events: list = []

    def event(enable_timing=False):
        e = _Event(log, enable_timing)
        events.append(e)
        return e

    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: comp)
    monkeypatch.setattr(torch.cuda, "Event", event)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: nullcontext())
    pool = PagedKVPool(2, 8, 4, 2, 8)
    pool.k.normal_()
    pool.v.normal_()
    tier = HostTier(pool, 4)
    tier.cuda, tier.stream = True, side  # the CUDA branch, on CPU tensors
    k3, v3 = pool.k[:, 3].clone(), pool.v[:, 3].clone()
    assert tier.offload("h", 3)
    assert log == ["side waits compute", "record", "record", "compute waits event 2"]
    assert not any(e.synced for e in events)  # issuing a copy does not wait on the host
    pool.k[:, 5] = 0
    pool.v[:, 5] = 0
    assert tier.reload("h", 5)
    assert torch.equal(pool.k[:, 5], k3) and torch.equal(pool.v[:, 5], v3)  # K and V both moved
    assert log[4:] == ["side waits compute", "record", "record", "compute waits event 6"]
    assert tier.seconds == {"offload": 1 / 1e3, "reload": 1 / 1e3}  # stub ms: one log position per copy
    assert events[-1].synced and tier.copies == {"offload": 1, "reload": 1}
    assert tier.bytes["reload"] == pool.page_bytes
