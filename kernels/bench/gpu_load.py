"""The GPU's SM clock and power draw while each bench case runs, read through NVML.

Why: a matmul that keeps the tensor cores busy can draw the card to its power limit, and
the driver then lowers the SM clock. cuBLAS and a tile kernel timed head to head may both
run well below the clock the dense peak is computed at, and a ratio of the two says nothing
about that. So the bench reads, while each case's batches run, what the card did: every
INTERVAL_S a thread reads the SM clock, the power draw and the clock event reasons (NVML's
word for why the clock is below its most: the power cap, a thermal slowdown, an idle GPU),
and one more reading is taken as each batch ends. ``window(key)`` brackets one batch of one
case (its warm-up launches and its timed launches, the L2 flushes between them included);
``samples_of(key)`` gives the readings that fell inside that case's windows. The card's
maximum SM clock and its enforced power limit are read once (``describe``).

Power comes from NVML's instantaneous field where the driver has it (``power_reading``
"instant"); otherwise from nvmlDeviceGetPowerUsage, which on Ampere and newer GPUs is
an average over the last second ("average"), longer than one batch of a fast case.

Reading only: nothing here sets a clock, a power limit or any other state of the card.
pynvml (the nvidia-ml-py package) is optional: without it, or where NVML refuses, the
sampler says why (``error``), takes no readings, and the bench runs as before.

Standard library and, when installed, pynvml.
"""

from __future__ import annotations

import bisect
import contextlib
import importlib
import threading
import time
from typing import Any, Callable, ContextManager, Hashable, Iterator

INTERVAL_S = 0.02
"""Seconds between the thread's readings."""
REASON_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
               0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
               0x80: "hw_power_brake_slowdown", 0x100: "display_clock"}
"""NVML's clocks event reasons (nvmlClocksEventReason*), bit -> the name the results file uses."""
POWER_INSTANT_FIELD = 186
"""NVML_FI_DEV_POWER_INSTANT: the board's power draw now, in milliwatts."""
NVML_CLOCK_SM = 1
NVML_SUCCESS = 0


class Sampler:
    """NVML readings of one GPU (found by its PCI bus id, as CUDA names it), in windows per case."""

    def __init__(self, pci_bus_id: str | None, interval_s: float = INTERVAL_S, nvml: Any = None):
        self.interval_s = interval_s
        self.error: str | None = None
        self.limits: dict[str, Any] = {}
        self._readings: list[tuple[float, int, float, int]] = []   # (monotonic s, SM MHz, W, reason bits)
        self._windows: dict[Hashable, list[tuple[float, float]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._instant = False
        try:
            self.nvml = nvml if nvml is not None else importlib.import_module("pynvml")
        except ImportError:
            self.error = "pynvml is not installed (pip install nvidia-ml-py): no clock or power readings"
            return
        try:
            self.nvml.nvmlInit()
            if not pci_bus_id:
                raise RuntimeError("CUDA gave no PCI bus id for the device")
            self.handle = self._handle(pci_bus_id)
            self._instant = self._instant_power() is not None
            self.limits = {
                "pci_bus_id": pci_bus_id,
                "max_sm_clock_mhz": int(self.nvml.nvmlDeviceGetMaxClockInfo(self.handle, NVML_CLOCK_SM)),
                "power_limit_w": self.nvml.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1000.0,
                "power_reading": "instant" if self._instant else "average",
            }
            self.read()  # one reading now: a call that fails, fails here, before anything is timed
        except Exception as exc:  # noqa: BLE001  (any NVML failure: no readings, and the results say why)
            self.error = f"NVML: {type(exc).__name__}: {exc}".splitlines()[0][:300]
            self.limits = {}
            with self._lock:
                self._readings.clear()

    def _handle(self, bus: str) -> Any:
        """NVML's handle of the GPU at ``bus``, as CUDA writes it (a 4-digit domain) or as NVML does (8)."""
        try:
            return self.nvml.nvmlDeviceGetHandleByPciBusId(bus)
        except Exception:  # noqa: BLE001  (try NVML's own spelling of the same id once)
            domain, _, rest = bus.partition(":")
            if not rest or len(domain) == 8:
                raise
            return self.nvml.nvmlDeviceGetHandleByPciBusId(f"{int(domain, 16):08x}:{rest}")

    # --- readings ------------------------------------------------------------------

    def _instant_power(self) -> float | None:
        """Watts from NVML's instantaneous power field, None where the driver does not answer it."""
        try:
            value = self.nvml.nvmlDeviceGetFieldValues(self.handle, [POWER_INSTANT_FIELD])[0]
        except Exception:  # noqa: BLE001  (an older driver or binding: fall back to the average)
            return None
        if value.nvmlReturn != NVML_SUCCESS:
            return None
        return value.value.uiVal / 1000.0

    def _reasons(self) -> int:
        get = getattr(self.nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) \
            or self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(get(self.handle))

    def read(self) -> None:
        """Take one reading now."""
        power = self._instant_power() if self._instant else None
        if power is None:
            power = self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
        reading = (time.monotonic(), int(self.nvml.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM)),
                   float(power), self._reasons())
        with self._lock:
            self._readings.append(reading)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.read()
            except Exception as exc:  # noqa: BLE001  (a reading that fails ends the readings, said once)
                self.error = f"NVML reading failed during the run: {type(exc).__name__}: {exc}"[:300]
                return

    @contextlib.contextmanager
    def running(self) -> Iterator[Sampler]:
        """The reading thread runs inside this block (not at all when NVML could not be read)."""
        if self.error is None:
            self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
            self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
                self._thread = None
            if self.limits:
                with contextlib.suppress(Exception):  # nothing left to read
                    self.nvml.nvmlShutdown()

    # --- windows -------------------------------------------------------------------

    def watch(self, phase: str) -> Callable[[str], ContextManager[None]]:
        """``timing.interleave``'s ``watch`` for one phase: each batch of case ``key`` is a window of
        ``(phase, key)`` (the same case timed again in a later phase has windows of its own)."""
        return lambda key: self.window((phase, key))

    @contextlib.contextmanager
    def window(self, key: Hashable) -> Iterator[None]:
        """Bracket one batch of case ``key``; one reading is taken as it ends (so that even a batch
        shorter than the interval has one), inside the window."""
        start = time.monotonic()
        try:
            yield
        finally:
            if self.error is None:
                try:
                    self.read()
                except Exception as exc:  # noqa: BLE001
                    self.error = f"NVML reading failed during the run: {type(exc).__name__}: {exc}"[:300]
            self._windows.setdefault(key, []).append((start, time.monotonic()))

    def samples_of(self, key: Hashable) -> dict[str, Any] | None:
        """The readings inside ``key``'s windows, as the results file keeps them (None without any):
        SM clock (MHz), power (W), the clock event reason bits of each reading (``REASON_BITS`` names
        them), and the seconds the windows lasted in all."""
        windows = self._windows.get(key, [])
        with self._lock:
            readings = sorted(self._readings)
        times = [r[0] for r in readings]
        inside = [r for a, b in windows for r in readings[bisect.bisect_left(times, a):bisect.bisect_right(times, b)]]
        if not inside:
            return None
        return {"sm_clock_mhz": [r[1] for r in inside], "power_w": [round(r[2], 3) for r in inside],
                "reasons": [r[3] for r in inside], "window_s": round(sum(b - a for a, b in windows), 4)}

    def case_dicts(self, cases: list[Any]) -> list[dict[str, Any]]:
        """Each case's results entry (``case.to_dict()``) with the readings of its batches in its own phase
        (``load``: SM clock MHz, power W and the clock event reason bits of each reading, and the seconds its
        windows lasted; None where there are none)."""
        return [{**c.to_dict(), "load": self.samples_of((c.info["phase"], c.key))} for c in cases]

    def describe(self) -> dict[str, Any]:
        """What the results file says about the readings as a whole: the card's maximum SM clock and power
        limit, how power was read, the names of the reason bits, and why there are no readings (``error``)."""
        return {"source": "NVML (pynvml), read only", "interval_ms": self.interval_s * 1e3, **self.limits,
                "reason_bits": {str(bit): name for bit, name in REASON_BITS.items()}, "error": self.error}


def pci_bus_id(cp: Any) -> str | None:
    """The current CUDA device's PCI bus id (NVML finds the same GPU by it whatever
    CUDA_VISIBLE_DEVICES renumbered)."""
    try:
        return str(cp.cuda.runtime.deviceGetPCIBusId(cp.cuda.runtime.getDevice()))
    except Exception:  # noqa: BLE001  (an older cupy: its Device says the same)
        pass
    try:
        return str(cp.cuda.Device().pci_bus_id)
    except Exception:  # noqa: BLE001  (no bus id: the sampler says so)
        return None
