"""Parsing and printing of lengths, rates, times and instance shapes.

One convention, checked at the boundary:

- token lengths: ``32k`` = 32,768 tokens (K = 1024, the convention of the PrfaaS paper's tables);
  ``32000`` is taken literally. ``1m`` = 1,048,576.
- link rates are bits per second, decimal: ``100G`` = ``100Gbps`` = 1e11 bit/s; ``12.5GB/s`` is bytes
  per second and converted (x 8).
- times: ``25ms``, ``4s``, ``1.5min``; a bare number in text is refused with a hint (``25`` -> "did you
  mean 25ms?"), a Python float is seconds.
- instance shapes: ``8xH200`` = 8 chips of profile ``h200``; ``32xH200`` in a layout is 4 instances of
  8 when the instance size is 8.
- sanity caps: a length is at most ``MAX_TOKENS`` (2^30) tokens, a chip count at most ``MAX_CHIPS``.

Every parser raises `PlanError` with the offending text and the expected form.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from .errors import PlanError

_LEN_SUFFIX = {"": 1, "k": 1024, "m": 1024**2}
_RATE_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_TIME_SUFFIX = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "min": 60.0, "h": 3600.0}

_NUMBER = r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)"

# Sanity caps: far beyond any real context or deployment, low enough that a slip such as ``--len 1e30``
# or ``100000000xH200`` is an error rather than a plan built on float overflow.
MAX_TOKENS = 2**30          # 1,073,741,824 tokens (1024m)
MAX_CHIPS = 1_000_000
# Link rates: any rate a network link can have is valid; a link too slow to offload anything gives a
# plan that offloads nothing (with a warning), never an error. 1 bit/s .. 1 Pbit/s.
MIN_LINK_BPS = 1.0
MAX_LINK_BPS = 1e15


def parse_finite(text: str, what: str, minimum: float | None = None, positive: bool = False,
                 maximum: float | None = None) -> float:
    """A finite float from a text field (a CSV cell); `PlanError` naming ``what`` and the text otherwise."""
    try:
        value = float(text)
    except (TypeError, ValueError, OverflowError):
        raise PlanError(f"{what}: expected a number, not {str(text)[:40]!r}") from None
    if not math.isfinite(value):
        raise PlanError(f"{what}: expected a finite number, not {str(text)[:40]!r}")
    if positive and value <= 0:
        raise PlanError(f"{what}: must be positive, not {str(text)[:40]!r}")
    if minimum is not None and value < minimum:
        raise PlanError(f"{what}: must be >= {minimum:g}, not {str(text)[:40]!r}")
    if maximum is not None and value > maximum:
        raise PlanError(f"{what}: must be at most {maximum:g}, not {str(text)[:40]!r}")
    return value


def parse_length(text: str | int, what: str = "length") -> int:
    """Parse a token length (``32k``, ``131072``, ``1.5k``) into a positive int number of tokens."""
    if isinstance(text, (int,)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = re.fullmatch(_NUMBER + r"\s*([km]?)(?:\s*tok(?:ens)?)?", str(text).strip().lower())
        if not m:
            raise PlanError(f"{what} {text!r}: expected a token count such as 8192, 32k or 1m")
        value = float(m.group(1)) * _LEN_SUFFIX[m.group(2)]
    if not math.isfinite(value) or value < 1 or value != int(value):
        raise PlanError(f"{what} {text!r}: expected a whole number of tokens >= 1")
    if value > MAX_TOKENS:
        raise PlanError(f"{what} {text!r}: more than the planner's cap of {MAX_TOKENS:,} tokens (1024m)")
    return int(value)


def parse_lengths(texts: list[str] | tuple[str, ...] | str, what: str = "length") -> list[int]:
    """Parse repeated or comma-separated lengths: ``["1k,8k", "32k"]`` -> [1024, 8192, 32768]."""
    if isinstance(texts, str):
        texts = [texts]
    out: list[int] = []
    for text in texts:
        for part in str(text).split(","):
            if part.strip():
                out.append(parse_length(part, what))
    if not out:
        raise PlanError(f"{what}: expected at least one token length")
    return out


def parse_rate_bps(text: str | float, what: str = "bandwidth") -> float:
    """Parse a link rate into bits per second: ``100G``, ``100Gbps``, ``400 Gb/s``, ``12.5GB/s``."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = str(text).strip()
        m = re.fullmatch(_NUMBER + r"\s*([kKmMgGtT]?)(bps|bit/s|b/s|B/s|Bps|)", s)
        if not m:
            raise PlanError(
                f"{what} {text!r}: expected a rate such as 100G, 100Gbps, 400Gb/s or 12.5GB/s")
        if not m.group(2) and not m.group(3):
            raise PlanError(f"{what} {text!r}: give a unit, e.g. {m.group(1)}G for {m.group(1)} Gbit/s")
        value = float(m.group(1)) * _RATE_SUFFIX[m.group(2).lower()]
        if m.group(3) in ("B/s", "Bps"):
            value *= 8.0
    if not math.isfinite(value) or value <= 0:
        raise PlanError(f"{what} {text!r}: expected a positive rate")
    if value < MIN_LINK_BPS:
        raise PlanError(f"{what} {text!r}: below {MIN_LINK_BPS:g} bit/s, not a network link (write 1k for 1 kbit/s)")
    if value > MAX_LINK_BPS:
        raise PlanError(f"{what} {text!r}: more than the planner's cap of {MAX_LINK_BPS / 1e12:g} Tbit/s")
    return value


def parse_headroom(value: str | float, what: str = "`link_headroom`") -> float:
    """A link headroom as a fraction of goodput in [0, 1) (at 100% nothing may cross): ``20%``, ``0.2`` or ``0`` (0.2 and 20%
    are the same; a bare number above 1 is refused rather than read as a percentage)."""
    text = str(value).strip()
    if isinstance(value, bool):
        raise PlanError(f"{what} {value!r}: expected a fraction such as 0.2 or a percentage such as 20%")
    m = re.fullmatch(_NUMBER + r"\s*(%?)", text)
    if not m:
        raise PlanError(f"{what} {text!r}: expected a fraction such as 0.2 or a percentage such as 20%")
    frac = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    if not (math.isfinite(frac) and 0.0 <= frac < 1.0):
        raise PlanError(f"{what} {text!r}: expected the share of the link's goodput to leave free, from 0 to "
                        "below 100% (e.g. 20% or 0.2)")
    return frac


def parse_time_s(text: str | float, what: str = "time", hint_unit: str = "s") -> float:
    """Parse a duration into seconds: ``25ms``, ``4s``, ``2min``; a float is taken as seconds. Text
    without a unit is a `PlanError` suggesting ``hint_unit`` (``--tpot 25``: "did you mean 25ms?")."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = re.fullmatch(_NUMBER + r"\s*(ms|us|s|min|h|)", str(text).strip().lower())
        if not m:
            raise PlanError(f"{what} {text!r}: expected a duration such as 25ms, 4s or 2min")
        if not m.group(2):
            raise PlanError(f"{what} {text!r}: give a unit (ms, s, min); did you mean {m.group(1)}{hint_unit}?")
        value = float(m.group(1)) * _TIME_SUFFIX[m.group(2)]
    if not math.isfinite(value) or value <= 0:
        raise PlanError(f"{what} {text!r}: expected a positive duration")
    return value


def parse_tpot_s(text: str, what: str = "`tpot`") -> float:
    """Parse a per-token latency SLO: ``25ms`` or a decode speed ``40tok/s`` (= 25 ms per token)."""
    s = str(text).strip().lower()
    m = re.fullmatch(_NUMBER + r"\s*(tok/s|tokens/s|tps)", s)
    if m:
        speed = float(m.group(1))
        if not (math.isfinite(speed) and speed > 0):
            raise PlanError(f"{what} {text!r}: expected a positive, finite speed")
        return 1.0 / speed
    return parse_time_s(text, what, "ms")


def parse_ttft_slo(text: str, what: str = "`ttft`") -> tuple[float, float]:
    """Parse a TTFT SLO ``p90<4s`` (any percentile, e.g. ``p95<3s`` or ``p99.9<10s``, then a duration)
    into (90.0, 4.0 seconds); ``mean<2s`` gives percentile 0 for the mean."""
    m = re.fullmatch(r"(?:p([0-9]+(?:\.[0-9]+)?)|(mean))\s*<\s*(.+)", str(text).strip().lower())
    if not m:
        raise PlanError(f"{what} {text!r}: expected a percentile bound such as p90<4s, p99<10s or mean<2s")
    q = 0.0 if m.group(2) else float(m.group(1))
    if m.group(1) is not None and not 0 < q < 100:
        raise PlanError(f"{what} {text!r}: the percentile must be between 0 and 100")
    return q, parse_time_s(m.group(3), what)


@dataclass(frozen=True)
class ChipCount:
    """``count`` chips of hardware profile ``chip`` (e.g. ``32xH200`` -> ChipCount(32, "h200"))."""

    count: int
    chip: str

    def __str__(self) -> str:
        return f"{self.count}x{self.chip.upper()}"


def parse_chip_count(text: str, what: str = "instance") -> ChipCount:
    """Parse ``8xH200`` / ``8*h20`` / ``h20`` (count 1) into a `ChipCount` (chip name lower-cased)."""
    parsed = _chip_count(str(text).strip())
    if parsed is None:
        raise PlanError(f"{what} {text!r}: expected chips as COUNTxCHIP, e.g. 8xH200")
    if parsed.count < 1:
        raise PlanError(f"{what} {text!r}: expected at least one chip")
    if parsed.count > MAX_CHIPS:
        raise PlanError(f"{what} {text!r}: more than the planner's cap of {MAX_CHIPS:,} chips")
    return parsed


@lru_cache(maxsize=1024)
def _chip_count(text: str) -> ChipCount | None:
    """The `ChipCount` ``text`` spells (its count unchecked), None when it spells none; kept, since a
    sweep parses the same few chip texts at every point (they are immutable)."""
    m = re.fullmatch(r"(?:([0-9]+)\s*[x*]\s*)?([A-Za-z][A-Za-z0-9._-]*)", text)
    if not m:
        return None
    return ChipCount(int(m.group(1)) if m.group(1) else 1, m.group(2).lower())


def format_tokens(n: float) -> str:
    """Short token count: 32768 -> '32K', 19400 -> '18.9K' (K = 1024), 500 -> '500'."""
    if n >= 1024:
        k = n / 1024
        return f"{k:.0f}K" if abs(k - round(k)) < 0.05 else f"{k:.1f}K"
    return f"{n:.0f}"


def plural(n: float, noun: str, many: str | None = None) -> str:
    """``noun`` as it goes after the count ``n``: ``plural(1, "point")`` -> 'point', ``plural(3, "point")`` ->
    'points' (``many``: an irregular plural). The caller prints the count in its own format."""
    return noun if n == 1 else (many or noun + "s")
