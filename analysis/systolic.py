"""Closed-form systolic-array model that reproduces SCALE-Sim 3.0.0's per-layer reports.

SCALE-Sim builds per-cycle demand matrices for the three operands and replays them through
double-buffered SRAM models; every count it reports is a function of the layer shape, the array
and the SRAM sizes. This module evaluates those functions directly: O(1) for cycles, utilisation
and SRAM traffic, O(1) for DRAM reads, and one step per mid-layer ofmap drain for DRAM writes,
so a layer costs microseconds however many cycles SCALE-Sim would simulate.

What is exact and what is an estimate is reported per layer by the ``exact_*`` flags of
``LayerResult``; tests/test_systolic.py pins each known difference against SCALE-Sim itself.
"""

from __future__ import annotations

import math
import operator
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

DATAFLOWS = ("os", "ws", "is")
BANDWIDTH_MODES = ("CALC", "USER")

# SCALE-Sim's read buffers in CALC mode group unique addresses into sets of 1/100 of the SRAM and
# flush the resident half once 50 sets have filled (read_buffer_estimate_bw.py).
_SETS_PER_SRAM = 100
_ACTIVE_SETS = 50
# Prefetch bandwidth (words/cycle) SCALE-Sim assumes for ifmap/filter in CALC mode.
_CALC_READ_BW = 10


@dataclass(frozen=True)
class ArrayConfig:
    """A systolic array and its SRAMs, with SCALE-Sim 3.0.0's defaults for every field.

    ``bandwidth`` is the cfg's ``Bandwidth`` (ofmap DRAM words/cycle in USER mode);
    ``ifmap_dram_bandwidth``/``filter_dram_bandwidth`` are the cfg's
    ``IfmapSRAMBankBandwidth``/``FilterSRAMBankBandwidth``, which SCALE-Sim uses as the read
    prefetch bandwidths in USER mode. ``word_size`` is bytes per element (SCALE-Sim fixes 1).
    """

    rows: int = 4
    cols: int = 4
    dataflow: str = "ws"
    ifmap_sram_kb: int = 256
    filter_sram_kb: int = 256
    ofmap_sram_kb: int = 128
    bandwidth_mode: str = "CALC"
    bandwidth: int = 10
    ifmap_dram_bandwidth: int = 10
    filter_dram_bandwidth: int = 10
    word_size: int = 1
    # Derived buffer geometry, computed once: (ifmap, filter) CALC-mode flush capacities and set
    # sizes in words, and the ofmap drain half and write-back words per cycle.
    _read_geometry: tuple[int, int, int, int] = field(init=False, repr=False, compare=False)
    _write_geometry: tuple[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("rows", "cols", "bandwidth", "ifmap_dram_bandwidth", "filter_dram_bandwidth"):
            _positive_int(name, getattr(self, name))
        _positive_int("word_size", self.word_size)
        if self.dataflow not in DATAFLOWS:
            raise ValueError(
                f"dataflow: unknown dataflow {self.dataflow!r}; expected one of {DATAFLOWS}"
            )
        if self.bandwidth_mode not in BANDWIDTH_MODES:
            raise ValueError(
                f"bandwidth_mode: unknown mode {self.bandwidth_mode!r}; expected one of {BANDWIDTH_MODES}"
            )
        for name in ("ifmap_sram_kb", "filter_sram_kb", "ofmap_sram_kb"):
            kb = getattr(self, name)
            _positive_int(name, kb)
            if kb * 1024 < self.word_size:
                raise ValueError(
                    f"{name}: SRAM of {kb} KB is smaller than one {self.word_size}-byte word"
                )
            if self.words(kb) < _SETS_PER_SRAM:
                # SCALE-Sim splits each SRAM into 100 sets and crashes below one word per set.
                raise ValueError(f"{name}: SRAM of {kb} KB holds fewer than {_SETS_PER_SRAM} words")
        set_i = self.words(self.ifmap_sram_kb) // _SETS_PER_SRAM
        set_f = self.words(self.filter_sram_kb) // _SETS_PER_SRAM
        ofmap_words = self.words(self.ofmap_sram_kb)
        write_bw = self.cols if self.bandwidth_mode == "CALC" else self.bandwidth
        object.__setattr__(
            self, "_read_geometry", (_ACTIVE_SETS * set_i, _ACTIVE_SETS * set_f, set_i, set_f)
        )
        object.__setattr__(
            self, "_write_geometry", (ofmap_words - _ceil_div(ofmap_words, 2), write_bw)
        )

    def words(self, sram_kb: int) -> int:
        """Capacity of an SRAM of ``sram_kb`` KB in words."""
        return (sram_kb * 1024) // self.word_size


@dataclass(slots=True)
class LayerResult:
    """One layer's COMPUTE_REPORT, BANDWIDTH_REPORT and DETAILED_ACCESS_REPORT numbers.

    Cycle fields are cycle numbers as SCALE-Sim prints them (DRAM prefetch before cycle 0 is
    negative). Which fields reproduce SCALE-Sim exactly:

    - ``exact_cycles``: cycles, stalls, utilisations and SRAM counts. Always in CALC mode; in USER
      mode unless an operand overflows its SRAM's active half or the ofmap drain stalls the array
      (then SCALE-Sim stalls on refetches and these are the stall-free numbers).
    - ``exact_dram``: the three DRAM counts. False only for a conv ifmap that overflows a CALC
      read buffer (refetches then depend on the order of overlapping windows' addresses), the
      USER-mode overflow above, or more than ``_MAX_DRAINS`` mid-layer ofmap drains.
    - ``exact_timeline``: DRAM start/stop cycles, SRAM start/stop cycles and
      ``total_cycles_incl_prefetch``. Also False when a read buffer flushes while some of its
      requests hit (a conv ifmap, or an OS filter re-read per row fold): its last DRAM cycle is
      then estimated as its operand's last demand.
    """

    total_cycles_incl_prefetch: int
    total_cycles: int
    stall_cycles: int
    overall_util_pct: float
    mapping_eff_pct: float
    compute_util_pct: float
    ifmap_sram_reads: int
    filter_sram_reads: int
    ofmap_sram_writes: int
    ifmap_dram_reads: int
    filter_dram_reads: int
    ofmap_dram_writes: int
    ifmap_sram_start_cycle: int
    ifmap_sram_stop_cycle: int
    filter_sram_start_cycle: int
    filter_sram_stop_cycle: int
    ofmap_sram_start_cycle: int
    ofmap_sram_stop_cycle: int
    ifmap_dram_start_cycle: int
    ifmap_dram_stop_cycle: int
    filter_dram_start_cycle: int
    filter_dram_stop_cycle: int
    ofmap_dram_start_cycle: int
    ofmap_dram_stop_cycle: int
    exact_dram: bool
    exact_cycles: bool
    exact_timeline: bool

    @property
    def avg_bandwidths(self) -> tuple[float, float, float, float, float, float]:
        """BANDWIDTH_REPORT row: avg ifmap/filter/ofmap SRAM then DRAM words per cycle."""
        t = self.total_cycles
        return (
            self.ifmap_sram_reads / t,
            self.filter_sram_reads / t,
            self.ofmap_sram_writes / t,
            self.ifmap_dram_reads / (self.ifmap_dram_stop_cycle - self.ifmap_dram_start_cycle + 1),
            self.filter_dram_reads
            / (self.filter_dram_stop_cycle - self.filter_dram_start_cycle + 1),
            self.ofmap_dram_writes / (self.ofmap_dram_stop_cycle - self.ofmap_dram_start_cycle + 1),
        )


def _positive_int(name: str, value: object) -> int:
    """``value`` as a Python int (numpy integers accepted); ValueError naming ``name`` otherwise."""
    if type(value) is int and value > 0:
        return value
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}") from None
    if isinstance(value, bool) or number <= 0:
        raise ValueError(f"{name}: must be a positive integer, got {value!r}")
    return number


def _check_array(arr: object) -> None:
    if not isinstance(arr, ArrayConfig):
        raise TypeError(f"arr: expected an ArrayConfig, got {type(arr).__name__}")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _covered(size: int, window: int, stride: int, out: int) -> int:
    """Input rows (or columns) touched by ``out`` windows; the last window may hang off the edge."""
    if stride <= window:
        return min(size, (out - 1) * stride + window)
    return _valid_pairs(size, window, stride, out)


def _valid_pairs(size: int, window: int, stride: int, out: int) -> int:
    """(output, filter tap) pairs that land inside the input; only the last window can hang off."""
    return (out - 1) * window + max(0, min(window, size - (out - 1) * stride))


@dataclass(frozen=True)
class _Clip:
    """A conv whose last output row/column windows hang off the ifmap.

    Their out-of-range taps are null requests in SCALE-Sim's ifmap operand, so the last ifmap
    demand can come earlier than a full window's (or even in an earlier fold). Only the last output
    row and column clip, so within any pixel range the latest pixel of each of the four kinds
    (row clipped or not x column clipped or not) decides where a fold's last demand lies.
    """

    out_h: int
    out_w: int
    filter_h: int
    filter_w: int
    channels: int
    last_rows: int  # filter rows inside the ifmap for the last output row (may be <= 0)
    last_cols: int

    def _kinds(self, lo: int, hi: int) -> list[tuple[int, int, int]]:
        """(pixel, valid filter rows, valid filter cols): latest pixel of each kind in [lo, hi]."""
        w, last_row_start = self.out_w, (self.out_h - 1) * self.out_w
        out = []
        if hi >= last_row_start + w - 1:
            out.append((last_row_start + w - 1, self.last_rows, self.last_cols))
        if hi >= last_row_start and w > 1:
            out.append((min(hi, last_row_start + w - 2), self.last_rows, self.filter_w))
        q = min(hi, last_row_start - 1)
        if q >= w - 1:
            out.append(((q + 1) // w * w - 1, self.filter_h, self.last_cols))
        if q >= 0 and w > 1:
            out.append((q if q % w != w - 1 else q - 1, self.filter_h, self.filter_w))
        return [k for k in out if k[0] >= lo and k[1] > 0 and k[2] > 0]

    def _tap(self, row: int, col: int) -> int:
        return (row * self.filter_w + col) * self.channels

    def _max_tap_upto(self, hi: int, rows: int, cols: int) -> int:
        row, col = hi // (self.filter_w * self.channels), (hi // self.channels) % self.filter_w
        if row >= rows:
            return self._tap(rows - 1, cols - 1) + self.channels - 1
        if col < cols:
            return hi
        return self._tap(row, cols - 1) + self.channels - 1

    def _min_tap_from(self, lo: int, rows: int, cols: int) -> int:
        row, col = lo // (self.filter_w * self.channels), (lo // self.channels) % self.filter_w
        if row >= rows:
            return 1 << 62
        if col < cols:
            return lo
        return self._tap(row + 1, 0) if row + 1 < rows else 1 << 62

    def _fold_last(self, df: str, rows: int, pixels: tuple[int, int], taps: tuple[int, int]) -> int:
        """Offset of the last non-null ifmap demand in a fold over these pixels and taps (-1: none)."""
        kinds = self._kinds(*pixels)
        lo_t, hi_t = taps
        if df == "os":
            return max(
                (self._max_tap_upto(hi_t, r, c) + p - pixels[0] for p, r, c in kinds), default=-1
            )
        if df == "ws":
            lines = [(p, self._max_tap_upto(hi_t, r, c)) for p, r, c in kinds]
            return max((rows + p + t - lo_t for p, t in lines if t >= lo_t), default=-1)
        first = min((self._min_tap_from(lo_t, r, c) for _, r, c in kinds), default=hi_t + 1)
        return rows - 1 - (first - lo_t) if first <= hi_t else -1

    def last_ifmap_demand(
        self, df: str, rows: int, cols: int, row_folds: int, col_folds: int, fold_len: int
    ) -> int | None:
        """Cycle offset of the last non-null ifmap demand from the start of the layer."""
        pixels, taps = self.out_h * self.out_w, self.filter_h * self.filter_w * self.channels
        folds = row_folds * col_folds
        for f in range(folds - 1, max(folds - 64, 0) - 1, -1):
            fc, fr = divmod(f, row_folds)
            lo_r = fr * rows
            if df == "os":
                span_p, span_t = (lo_r, min(pixels, lo_r + rows) - 1), (0, taps - 1)
            elif df == "ws":
                span_p, span_t = (0, pixels - 1), (lo_r, min(taps, lo_r + rows) - 1)
            else:
                lo_c = fc * cols
                span_p = (lo_c, min(pixels, lo_c + cols) - 1)
                span_t = (lo_r, min(taps, lo_r + rows) - 1)
            line = self._fold_last(df, rows, span_p, span_t)
            if line >= 0:
                return f * fold_len + line
        return None


def _epoch_repeat(n: int, repeats: int, fill: int, capacity: int) -> tuple[int, int]:
    """Misses and new fill when ``n`` distinct, not-resident addresses are streamed ``repeats`` times.

    SCALE-Sim's CALC-mode read buffer keeps every address fetched since its last flush and
    flushes when ``capacity`` have been fetched, so only counts matter, not the order.
    """
    if fill + n < capacity:
        return n, fill + n
    tail = (fill + n) % capacity
    if repeats == 1:
        return n, tail
    if n < capacity:
        return 2 * n - tail, n
    return repeats * n, (fill + repeats * n) % capacity


def simulate_conv(
    ifmap_h: int,
    ifmap_w: int,
    filter_h: int,
    filter_w: int,
    channels: int,
    num_filters: int,
    stride_h: int,
    stride_w: int,
    arr: ArrayConfig,
) -> LayerResult:
    """SCALE-Sim's report for one convolution layer (its topology fields; no padding, no batch)."""
    ifmap_h, ifmap_w, filter_h, filter_w, channels, num_filters, stride_h, stride_w = (
        _positive_int(name, value)
        for name, value in (
            ("ifmap_h", ifmap_h),
            ("ifmap_w", ifmap_w),
            ("filter_h", filter_h),
            ("filter_w", filter_w),
            ("channels", channels),
            ("num_filters", num_filters),
            ("stride_h", stride_h),
            ("stride_w", stride_w),
        )
    )
    if filter_h > ifmap_h:
        raise ValueError(f"filter_h: {filter_h} is larger than ifmap_h {ifmap_h}")
    if filter_w > ifmap_w:
        raise ValueError(f"filter_w: {filter_w} is larger than ifmap_w {ifmap_w}")
    _check_array(arr)
    out_h = _ceil_div(ifmap_h - filter_h + stride_h, stride_h)
    out_w = _ceil_div(ifmap_w - filter_w + stride_w, stride_w)
    footprint = (
        _covered(ifmap_h, filter_h, stride_h, out_h)
        * _covered(ifmap_w, filter_w, stride_w, out_w)
        * channels
    )
    valid_pairs = (
        _valid_pairs(ifmap_h, filter_h, stride_h, out_h)
        * _valid_pairs(ifmap_w, filter_w, stride_w, out_w)
        * channels
    )
    window = filter_h * filter_w * channels
    clip = None
    if valid_pairs != out_h * out_w * window:
        clip = _Clip(
            out_h,
            out_w,
            filter_h,
            filter_w,
            channels,
            min(filter_h, ifmap_h - (out_h - 1) * stride_h),
            min(filter_w, ifmap_w - (out_w - 1) * stride_w),
        )
    return _simulate(out_h * out_w, window, num_filters, footprint, valid_pairs, arr, clip)


def simulate_gemm(m: int, n: int, k: int, arr: ArrayConfig) -> LayerResult:
    """SCALE-Sim's report for C[M,N] = A[M,K] B[K,N], as its GEMM mode maps it onto a conv."""
    m, n, k = _positive_int("M", m), _positive_int("N", n), _positive_int("K", k)
    _check_array(arr)
    return _simulate(m, k, n, m * k, m * k, arr, None)


def simulate_gemms(
    m: Sequence[int], n: Sequence[int], k: Sequence[int], arr: ArrayConfig
) -> list[LayerResult]:
    """Batched ``simulate_gemm`` over equal-length sequences (or numpy arrays) of M, N, K."""
    if not len(m) == len(n) == len(k):
        raise ValueError(f"M, N, K: lengths differ ({len(m)}, {len(n)}, {len(k)})")
    return [simulate_gemm(a, b, c, arr) for a, b, c in zip(m, n, k, strict=True)]


def _simulate(
    pixels: int,
    window: int,
    filters: int,
    footprint: int,
    valid_pairs: int,
    arr: ArrayConfig,
    clip: _Clip | None,
) -> LayerResult:
    """Core model on SCALE-Sim's operand matrices: ifmap pixels x window, filter window x filters."""
    rows, cols, df = arr.rows, arr.cols, arr.dataflow
    # Spatial rows / spatial cols / temporal extent of the mapping (SCALE-Sim paper, Table I).
    if df == "os":
        s_r, s_c, t = pixels, filters, window
    elif df == "ws":
        s_r, s_c, t = window, filters, pixels
    else:
        s_r, s_c, t = window, pixels, filters
    row_folds, col_folds = -(-s_r // rows), -(-s_c // cols)
    folds = row_folds * col_folds
    first_r, last_r = min(rows, s_r), s_r - (row_folds - 1) * rows
    last_c = s_c - (col_folds - 1) * cols

    # Per fold: its length in cycles, and the first demand of each operand in the first fold and
    # its last demand in the last fold (cycle offsets inside a fold; see the compute/*.py files).
    if df == "os":
        fold_len = t + rows + cols - 2
        util_len = fold_len
        ifmap_sram = col_folds * t * s_r
        filter_sram = row_folds * t * s_c
        # SCALE-Sim adds rows + cols per fold to the OS ofmap write count (a counting quirk).
        ofmap_sram = s_r * s_c + folds * (rows + cols)
        i_first, i_last = 0, t + last_r - 2
        f_first, f_last = 0, t + last_c - 2
        o_first, o_last = t - 1 + rows - first_r, t + rows + last_c - 3
    else:
        fold_len = 2 * rows + cols + t - 2
        util_len = fold_len + cols - 1
        ofmap_sram = row_folds * pixels * filters
        o_first, o_last = 2 * rows - 1, 2 * rows + t + last_c - 3
        if df == "ws":
            ifmap_sram = col_folds * t * s_r
            filter_sram = window * filters
            i_first, i_last = rows, rows + t + last_r - 2
            f_first, f_last = rows - first_r, rows - 1
        else:
            ifmap_sram = window * pixels
            filter_sram = col_folds * window * filters
            i_first, i_last = rows - first_r, rows - 1
            f_first, f_last = rows, rows + t + last_r - 2

    total_cycles = folds * fold_len - 1
    last_fold = (folds - 1) * fold_len
    ifmap_span_exact = True
    if clip is not None:
        clipped_last = clip.last_ifmap_demand(df, rows, cols, row_folds, col_folds, fold_len)
        ifmap_span_exact = clipped_last is not None
        if clipped_last is not None:
            i_last = clipped_last - last_fold
    macs = pixels * window * filters
    array = rows * cols

    by_row, by_col, const_t = (
        (rows, last_r, _BY_ROW_FOLD),
        (cols, last_c, _BY_COL_FOLD),
        (t, t, _CONST),
    )
    flat_rows = (rows, True)
    if df == "os":
        read_streams = ((const_t, by_row, (0, False), True), (const_t, by_col, (0, False), True))
    elif df == "ws":
        read_streams = ((const_t, by_row, (rows, False), True), (by_row, by_col, flat_rows, False))
    else:
        read_streams = ((by_row, by_col, flat_rows, False), (const_t, by_row, (rows, False), True))
    folding = (fold_len, row_folds, col_folds)
    ifmap, filt = _calc_reads(
        df,
        window,
        filters,
        footprint,
        footprint == pixels * window,
        row_folds,
        col_folds,
        (i_first, f_first),
        (last_fold + i_last, last_fold + f_last),
        ((*folding, *read_streams[0]), (*folding, *read_streams[1])),
        arr,
    )
    if df == "os":
        ofmap_elems = s_r * s_c
        ofmap_stream = (by_row, by_col, (t - 1 + rows, True), True)
    else:
        ofmap_elems = ofmap_sram
        ofmap_stream = (const_t, by_col, (2 * rows - 1, False), True)
    ofmap = _dram_writes(
        ofmap_elems, (fold_len, row_folds, col_folds, *ofmap_stream), total_cycles, arr
    )
    exact_cycles = True
    if arr.bandwidth_mode == "USER":
        if df == "os":
            prefetch = (row_folds * rows * window, col_folds * cols * window)
        elif df == "ws":
            prefetch = (row_folds * rows * pixels, col_folds * cols * window)
        else:
            prefetch = (col_folds * cols * window, row_folds * rows * filters)
        ifmap, filt, exact_cycles = _user_reads(
            prefetch, (valid_pairs, window * filters), (ifmap, filt), arr
        )
        exact_cycles = exact_cycles and ofmap[3]
    return LayerResult(
        ofmap[2] - min(ifmap[1], filt[1]),
        total_cycles,
        0,
        (macs * 100) / (total_cycles * array),
        s_r * s_c / (array * folds) * 100,
        s_r * s_c * t / (array * util_len * folds) * 100,
        ifmap_sram,
        filter_sram,
        ofmap_sram,
        ifmap[0],
        filt[0],
        ofmap[0],
        i_first + 1,
        last_fold + i_last + 1,
        f_first + 1,
        last_fold + f_last + 1,
        o_first,
        last_fold + o_last,
        ifmap[1],
        ifmap[2],
        filt[1],
        filt[2],
        ofmap[1],
        ofmap[2],
        ifmap[3] and filt[3] and ofmap[3],
        exact_cycles,
        ifmap_span_exact and ifmap[4] and filt[4] and ofmap[3],
    )


# One operand's DRAM traffic: (count, first DRAM cycle, last DRAM cycle, count exact, cycles exact).
_Operand = tuple[int, int, int, bool, bool]


def _repeat_blocks(block: int, count: int, repeats: int, capacity: int) -> tuple[int, int]:
    """Misses and final fill for ``count`` distinct blocks of ``block`` addresses, each streamed
    ``repeats`` times in a row, from an empty CALC-mode buffer (see ``_epoch_repeat``)."""
    if count == 0:
        return 0, 0
    if repeats == 1 or block >= capacity:
        return count * repeats * block, (count * repeats * block) % capacity
    # Here the fill grows by one block per block until it would overflow; after the first q
    # blocks every q-th block overflows, flushes and refetches part of itself.
    q = _ceil_div(capacity, block) - 1
    overflows = (count - 1) // q
    misses = (count - overflows) * block + overflows * (capacity - (q - 1) * block)
    fill = count * block if overflows == 0 else (count - overflows * q) * block
    return misses, fill


def _calc_reads(
    df: str,
    window: int,
    filters: int,
    footprint: int,
    distinct: bool,
    row_folds: int,
    col_folds: int,
    first_demand: tuple[int, int],
    last_demand: tuple[int, int],
    streams: tuple[tuple, tuple],
    arr: ArrayConfig,
) -> tuple[_Operand, _Operand]:
    """CALC-mode DRAM reads of the ifmap and filter SRAMs (read_buffer_estimate_bw.py)."""
    cap_i, cap_f, set_i, set_f = arr._read_geometry

    # OS and WS stream the whole ifmap once per filter column fold; IS streams each ifmap block
    # once. A conv's ifmap repeats addresses (overlapping windows), so once it overflows the
    # buffer its count depends on the address order and is estimated as if all were distinct.
    if footprint < cap_i:
        ifmap_reads = footprint
    else:
        ifmap_reads = footprint if df == "is" else col_folds * footprint

    filter_total = window * filters
    if df == "ws" or filter_total < cap_f:
        filter_reads = filter_total
    elif df == "is":
        filter_reads = col_folds * filter_total
    else:
        full = filters // arr.cols
        filter_reads, fill = _repeat_blocks(window * arr.cols, full, row_folds, cap_f)
        rest = filters - full * arr.cols
        if rest:
            filter_reads += _epoch_repeat(window * rest, row_folds, fill, cap_f)[0]
    return (
        _calc_span(
            ifmap_reads,
            footprint,
            set_i,
            cap_i,
            distinct or footprint < cap_i,
            first_demand[0],
            last_demand[0],
            streams[0],
        ),
        _calc_span(
            filter_reads,
            filter_total,
            set_f,
            cap_f,
            True,
            first_demand[1],
            last_demand[1],
            streams[1],
        ),
    )


def _calc_span(
    reads: int,
    unique: int,
    per_set: int,
    capacity: int,
    exact: bool,
    first: int,
    last: int,
    stream: tuple,
) -> _Operand:
    """First/last DRAM cycle of a CALC-mode read buffer.

    Without a flush SCALE-Sim fetches everything before cycle 0 at 10 words/cycle, rounded up to
    whole sets. With flushes the first fetch ends just before the first demand and the last one
    ends a cycle after the request that triggered the last flush: when every request misses,
    that is request number capacity x (number of flushes); otherwise it is estimated as the
    operand's last demand.
    """
    if unique < capacity:
        cycles = _ceil_div(_ceil_div(unique, per_set) * per_set, _CALC_READ_BW)
        return (reads, -cycles, -1, exact, True)
    start = first - _ceil_div(_ACTIVE_SETS * per_set, _CALC_READ_BW)
    requests = _Stream(*stream)
    if not exact or reads != requests.total:
        return (reads, start, last, exact, False)
    return (reads, start, requests.cycle_of(reads // capacity * capacity - 1) + 1, True, True)


def _user_reads(
    prefetch: tuple[int, int],
    valid: tuple[int, int],
    calc: tuple[_Operand, _Operand],
    arr: ArrayConfig,
) -> tuple[_Operand, _Operand, bool]:
    """USER-mode DRAM reads (read_buffer.py): exact while each operand fits the active half.

    SCALE-Sim prefetches the padded prefetch matrix in lines of the bank bandwidth; when all its
    valid addresses fit the active buffer nothing is refetched and nothing stalls. Otherwise the
    CALC-mode counts are returned as estimates and the third item is False.
    """
    out = []
    fits = True
    for elems, n_valid, kb, bw, est in zip(
        prefetch,
        valid,
        (arr.ifmap_sram_kb, arr.filter_sram_kb),
        (arr.ifmap_dram_bandwidth, arr.filter_dram_bandwidth),
        calc,
    ):
        words = arr.words(kb)
        active = _ceil_div(words, 2)
        per_set = _ceil_div(words, _SETS_PER_SRAM)
        if n_valid // per_set + 1 > _ceil_div(active, per_set):
            fits = False
            out.append((est[0], est[1], est[2], False, False))
            continue
        lines = min(_ceil_div(active, bw), _ceil_div(elems, bw))
        out.append((lines * bw, -lines, -1, True, True))
    return out[0], out[1], fits


# Past this many mid-layer ofmap drains the write-back is estimated instead of replayed.
_MAX_DRAINS = 5_000


def _tri(x: int) -> int:
    return x * (x + 1) // 2


def _block_lines(x: int, h: int, w: int) -> int:
    """Writes in the first ``x`` cycles of an h x w output block skewed one cycle per column."""
    a, b = (h, w) if h < w else (w, h)
    if x <= 0:
        return 0
    if x < a:
        return _tri(x)
    if x <= b:
        return _tri(a - 1) + (x - a + 1) * a
    if x < a + b - 1:
        return h * w - _tri(a + b - 1 - x)
    return h * w


def _block_line_of(e: int, h: int, w: int) -> int:
    """Cycle offset, inside a skewed h x w output block, of its ``e``-th write (row-major per cycle)."""
    a, b = (h, w) if h < w else (w, h)
    ramp = _tri(a - 1)
    if e < ramp:
        return (math.isqrt(8 * e + 1) - 1) // 2
    if e < ramp + (b - a + 1) * a:
        return a - 1 + (e - ramp) // a
    return a + b - 2 - (math.isqrt(8 * (h * w - 1 - e) + 1) - 1) // 2


_CONST, _BY_ROW_FOLD, _BY_COL_FOLD = 0, 1, 2


class _Stream:
    """When each (non-null) request of one operand reaches its SRAM.

    Folds run filter-fold-major. Each fold's requests form an h x w block starting ``s0`` cycles
    into the fold: skewed (column k delayed k cycles, a request per column per cycle) or flat (one
    row of w requests per cycle, rows flipped so the block ends at ``s0 + h - 1``). Block sides
    are the full or the last fold's extent along the row or column folds (``_BY_*``), or constant;
    OS ofmap and flat blocks start later the fewer rows they use (``s0 = base - h``). These are
    the demand matrices of compute/systolic_compute_*.py.
    """

    __slots__ = (
        "a",
        "b",
        "bsum",
        "col_folds",
        "fold_len",
        "h",
        "row_folds",
        "s0",
        "skew",
        "total",
        "w",
    )

    def __init__(
        self,
        fold_len: int,
        row_folds: int,
        col_folds: int,
        h: tuple[int, int, int],
        w: tuple[int, int, int],
        s0: tuple[int, bool],
        skew: bool,
    ) -> None:
        self.fold_len, self.row_folds, self.col_folds = fold_len, row_folds, col_folds
        self.h, self.w, self.s0, self.skew = h, w, s0, skew
        # Requests per fold factor as a(column fold) * b(row fold); (full, last) of each.
        a_full = a_last = b_full = b_last = 1
        for full, last, by in (h, w):
            if by == _BY_COL_FOLD:
                a_full, a_last = a_full * full, a_last * last
            else:
                b_full, b_last = b_full * full, b_last * (last if by == _BY_ROW_FOLD else full)
        self.a, self.b = (a_full, a_last), (b_full, b_last)
        self.bsum = (row_folds - 1) * b_full + b_last
        self.total = ((col_folds - 1) * a_full + a_last) * self.bsum

    def _fold(self, fc: int, fr: int) -> tuple[int, int, int, int]:
        """(requests before fold (fc, fr), its block's h, w and first cycle offset)."""
        last_c, last_r = fc == self.col_folds - 1, fr == self.row_folds - 1
        h_full, h_last, h_by = self.h
        w_full, w_last, w_by = self.w
        h = h_last if (last_r if h_by == _BY_ROW_FOLD else last_c and h_by) else h_full
        w = w_last if (last_c if w_by == _BY_COL_FOLD else last_r and w_by) else w_full
        a = self.a[1] if last_c else self.a[0]
        base, minus_h = self.s0
        return fc * self.a[0] * self.bsum + fr * a * self.b[0], h, w, base - h if minus_h else base

    def cycle_of(self, j: int) -> int:
        """Cycle of the ``j``-th request (0-based)."""
        fc = min(j // (self.a[0] * self.bsum), self.col_folds - 1)
        a = self.a[1] if fc == self.col_folds - 1 else self.a[0]
        fr = min((j - fc * self.a[0] * self.bsum) // (a * self.b[0]), self.row_folds - 1)
        before, h, w, s0 = self._fold(fc, fr)
        e = j - before
        offset = _block_line_of(e, h, w) if self.skew else e // w
        return (fc * self.row_folds + fr) * self.fold_len + s0 + offset

    def requests_before(self, cycle: int) -> int:
        """Requests issued in cycles before ``cycle``."""
        f = cycle // self.fold_len
        if f >= self.row_folds * self.col_folds:
            return self.total
        before, h, w, s0 = self._fold(*divmod(f, self.row_folds))
        x = cycle - f * self.fold_len - s0
        return before + (_block_lines(x, h, w) if self.skew else min(max(x, 0), h) * w)


def _dram_writes(
    elems: int, stream_args: tuple[int, ...], total_cycles: int, arr: ArrayConfig
) -> _Operand:
    """DRAM writes of the ofmap SRAM, replaying write_buffer.py one drain at a time.

    Writes fill lines of ``bw`` words. Once more than the drain half is held (and the previous
    drain is done) the buffer closes its current line, padding it, and drains the next
    ceil(half / bw) lines, one per cycle, counting padding except in a drain's last line. After
    the last compute cycle everything left drains the same way. A drain stalling the array (USER
    mode with a slow ofmap bandwidth) or more than ``_MAX_DRAINS`` drains make it an estimate.
    """
    drain_half, bw = arr._write_geometry
    if elems <= drain_half:
        # Never more than half full: one write-back after the last compute cycle.
        return (elems, total_cycles, total_cycles + _ceil_div(elems, bw) - 1, True, True)
    stream = _Stream(*stream_args)
    words = arr.words(arr.ofmap_sram_kb)
    lines_per_drain = _ceil_div(drain_half, bw)
    if elems > drain_half * _MAX_DRAINS:
        first = stream.cycle_of(drain_half)
        return (elems, first, total_cycles + lines_per_drain - 1, False, False)
    drained = stored_lines_upto = lines = drained_lines = count = 0
    pads: deque[tuple[int, int]] = deque()  # closed lines that are not full: (line, padding)
    first = drain_end = 0
    last_trigger = -1
    # elems > drain_half, so the first pass through the loop always drains.
    while True:
        ready = stream.requests_before(drain_end)
        if words + drained - 1 < min(ready, elems):
            return (elems, first, drain_end, False, False)
        j = max(ready, drain_half + drained, last_trigger + 1)
        if j >= elems:
            break
        cycle = stream.cycle_of(j)
        lines, stored_lines_upto = _close_lines(j + 1, stored_lines_upto, lines, bw, pads)
        end = min(drained_lines + lines_per_drain, lines)
        size = (end - drained_lines) * bw
        while pads and pads[0][0] < end:
            line, pad = pads.popleft()
            if line == end - 1:
                size -= pad
        count += size
        drained += size
        if last_trigger < 0:
            first = cycle
        drain_end = cycle + end - drained_lines - 1
        drained_lines, last_trigger = end, j
    lines, _ = _close_lines(elems, stored_lines_upto, lines, bw, pads)
    remaining = lines - drained_lines
    count += remaining * bw
    for line, pad in pads:
        if (line - drained_lines + 1) % lines_per_drain == 0 or line == lines - 1:
            count -= pad
    return (count, first, max(drain_end, total_cycles + remaining - 1), True, True)


def _close_lines(
    stored: int, closed_upto: int, lines: int, bw: int, pads: deque[tuple[int, int]]
) -> tuple[int, int]:
    """Close the writes since ``closed_upto`` into lines of ``bw``; returns (lines, stored)."""
    segment = stored - closed_upto
    new = _ceil_div(segment, bw)
    if segment % bw:
        pads.append((lines + new - 1, bw - segment % bw))
    return lines + new, stored
