"""Reading a Nsight Compute report's launches through NVIDIA's `ncu_report`: each launch's name,
metrics, rule results, sections and source hotspots, with the damage checks of ncu_rep.py's
docstring at the level of one launch.

Kept apart from ncu_rep.py (the container check, the Profile) and free of pandas: the worker
processes that read a big report in stretches (ncu_workers.py) import only this.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ...core.errors import MissingDependency
from . import ncu_metrics

INSTALL_HINT = "pip install 'tb-hwprof[ncu]' (NVIDIA's ncu-report module; no GPU needed)"


def import_ncu_report():
    """NVIDIA's module.  Nsight Compute's own copy (extras/python/ncu_report.py, 2025.3 on an H200)
    crashes the process in IMetric.unit when pyarrow (which pandas 3 imports) was loaded before it:
    refused then with how to get one that does not (PyPI's ncu-report is a package, and is fine)."""
    after_pyarrow = "ncu_report" not in sys.modules and "pyarrow" in sys.modules
    try:
        import ncu_report  # noqa: WPS433 (optional, proprietary: imported on use)
    except ImportError:
        raise MissingDependency(f"reading .ncu-rep files needs NVIDIA's ncu_report: {INSTALL_HINT}") from None
    if after_pyarrow and Path(getattr(ncu_report, "__file__", "") or "").name == "ncu_report.py":
        raise MissingDependency(f"{ncu_report.__file__}: Nsight Compute's own copy of ncu_report crashes once pyarrow "
                                f"is loaded (pandas imports it) -- {INSTALL_HINT}, or import ncu_report before pandas")
    return ncu_report


class DamagedLaunch(Exception):
    """One launch of the report is damaged (str: what, in words)."""


@dataclasses.dataclass(frozen=True)
class MetricAccess:
    """The calls that read one metric, each f(object, ...): IAction.metric_by_name, IMetric.kind and
    unit, and per value kind the accessor IMetric.value() dispatches to (without the dict of lambdas
    value() builds on every call: a third of the reading time of a big report).  They are the SWIG
    functions those methods forward to, called directly: the four methods in between cost ~1 us a
    metric (~30 ms of a 30k-metric report); the methods themselves where the module has no such
    function."""

    by_name: object
    kind: object
    unit: object
    readers: Dict[int, object]

    @classmethod
    def of(cls, ncu_report) -> "MetricAccess":
        m, swig = ncu_report.IMetric, getattr(ncu_report, "_ncu_report", None)

        def call(cls_name, method):
            return getattr(swig, f"{cls_name}_{method}", None) or getattr(getattr(ncu_report, cls_name), method)
        none = lambda metric: None  # noqa: E731
        as_double, as_uint64 = call("IMetric", "as_double"), call("IMetric", "as_uint64")
        readers = {m.ValueKind_ANY: none, m.ValueKind_UNKNOWN: none,
                   m.ValueKind_DOUBLE: as_double, m.ValueKind_FLOAT: as_double,
                   m.ValueKind_STRING: call("IMetric", "as_string"), m.ValueKind_UINT32: as_uint64,
                   m.ValueKind_UINT64: as_uint64}
        return cls(call("IAction", "metric_by_name"), call("IMetric", "kind"), call("IMetric", "unit"), readers)


# Every metric name Nsight Compute writes is printable ASCII without spaces ("sm__cycles_elapsed.avg",
# "breakdown:...", "regex:..."): anything else is a damaged name table.
METRIC_NAME = re.compile(r"[!-~]+")
# What ncu_report's C++ code prints on stderr: absl's preamble, and error lines ("E0000 00:00:... ]").
ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
LIBRARY_ERROR = re.compile(r"^[EF]\d{4} [^\]]*\] (.*)$")
SALVAGE_FIX = "re-capture, or pass --salvage to keep the sound launches"


@contextlib.contextmanager
def library_stderr(lines: List[str]):
    """Collect into `lines` what is written to the process' stderr (fd 2) meanwhile: ncu_report's
    protobuf code reports a record it could not parse there, then carries on without it."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all: nothing to collect
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines.extend(sink.read().decode("utf-8", "replace").splitlines())


def library_errors(lines: List[str]) -> List[str]:
    """The library's error messages among `lines`; anything else that was written there (not the
    library's preamble) is passed on to stderr, not hidden."""
    errors, others = [], []
    for line in lines:
        match = LIBRARY_ERROR.match(line)
        if match:
            errors.append(match.group(1))
        elif line.strip() and line != ABSL_PREAMBLE:
            others.append(line)
    if others:
        print("\n".join(others), file=sys.stderr)
    return errors


@contextlib.contextmanager
def library_call():
    """ncu_report (SWIG) on a damaged launch: a TypeError for a name that is not a valid C string,
    a UnicodeDecodeError for text that is not UTF-8."""
    try:
        yield
    except (TypeError, UnicodeDecodeError) as e:
        raise DamagedLaunch(f"Nsight Compute's reader failed on it ({type(e).__name__}: {e})") from None


# unit__counter: snake case, at most a trailing capitalised word ("nvlink__dev0Id").
UNIT_COUNTER = re.compile(r"[a-z][a-z0-9]*__[a-z0-9_]+(?:[A-Z][a-z]+)?")
# A rollup or submetric word after the counter: snake case ("peak_sustained_elapsed", "per_second").
SUFFIX_WORD = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")


@dataclasses.dataclass
class MetricGrammar:
    """Nsight Compute's metric names: [prefix:]unit__counter[.word ...] or a plain snake-case name,
    unit and counter in snake case (UNIT_COUNTER), then any number of rollup / submetric words
    (2025.3 writes three: `.avg.peak_sustained_elapsed.per_second`).  Each word is snake case and
    made of known parts: the parts of ncu_report's own enum words (RollupOperation_SUM -> "sum",
    MetricSubtype_PEAK_SUSTAINED_ELAPSED_PER_SECOND -> "peak", "sustained", ...), or a part this
    report attests itself, in two or more of its names (a newer Nsight Compute's vocabulary is used
    across counters; a flipped byte renames one name).  A name that fails is a damaged entry of the
    name table: its metric is dropped and listed, the launch kept."""

    parts: frozenset
    attested: set = dataclasses.field(default_factory=set)

    @classmethod
    def of(cls, ncu_report) -> "MetricGrammar":
        words = [n.split("_", 1)[1].lower() for n in dir(ncu_report.IMetric)
                 if n.startswith(("RollupOperation_", "MetricSubtype_"))]
        return cls(frozenset(part for word in words for part in word.split("_")) - {"none"})

    def unknown_parts(self, name: str) -> Optional[set]:
        """The suffix parts of `name` neither known nor attested, or None when its shape is broken."""
        if name.startswith("regex:"):  # a section's metric pattern, not a name
            return set()
        parts = name.split(".")
        counter = next((i for i, part in enumerate(parts) if "__" in part), None)
        if counter is None:  # not a unit__counter name ("inst_executed", "derived_tempMetric0"): no suffix either
            return set() if len(parts) == 1 else None
        if not UNIT_COUNTER.fullmatch(parts[counter].rsplit(":", 1)[-1]):  # after "breakdown:", "pmsampling:"
            return None
        tail = parts[counter + 1:]
        if not all(SUFFIX_WORD.fullmatch(word) for word in tail):
            return None
        return {part for word in tail for part in word.split("_")} - self.parts - self.attested

    def attest(self, names: List[str]) -> None:
        """Accept the unknown suffix parts that two or more of `names` (distinct names) share."""
        seen: Dict[str, int] = {}
        for name in set(names):
            for part in self.unknown_parts(name) or ():
                seen[part] = seen.get(part, 0) + 1
        self.attested.update(part for part, count in seen.items() if count >= 2)


# Control characters but tab and newlines, and lone surrogates (bytes that were not UTF-8).
_UNREADABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")


def readable_text(text: str) -> bool:
    """No lone surrogates (bytes that were not UTF-8) and no control characters but tab and newlines
    (one regex search in C: a per-character Python loop cost ~10% of a report's read)."""
    return _UNREADABLE.search(text) is None


def launch_name(action, ncu_report) -> str:
    with library_call():
        name = action.name(ncu_report.IAction.NameBase_FUNCTION)
    if not name:
        raise DamagedLaunch("no kernel name")
    if not name.isprintable():
        raise DamagedLaunch(f"kernel name {repr(name)[:60]} is not readable text")
    return name


def _name_damage(name, grammar: MetricGrammar) -> Optional[str]:
    if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
        return "its name is not readable text"
    unknown = grammar.unknown_parts(name)
    if unknown is None:
        return "its name is not shaped as a Nsight Compute metric name"
    if unknown:
        return f"its name has a word no Nsight Compute uses there ({', '.join(sorted(unknown))})"
    return None


def _metric_names(action, grammar: MetricGrammar, sound: set) -> Tuple[List[str], Dict[str, str]]:
    """(the launch's sound metric names, {damaged name: why}), each name checked once per report
    (`sound`: names already checked).  A name listed twice is damage of the launch's record."""
    with library_call():
        names = list(action.metric_names())
    if len(set(names)) != len(names):
        raise DamagedLaunch("a metric name is listed twice")
    dropped: Dict[str, str] = {}
    if not sound.issuperset(names):  # mostly the names of the launches before: one test in C
        fresh = [name for name in names if name not in sound]
        grammar.attest([name for name in fresh if isinstance(name, str)])
        for name in fresh:
            damage = _name_damage(name, grammar)
            if damage:
                dropped[name] = damage
            else:
                sound.add(name)
    return ([name for name in names if name not in dropped] if dropped else names), dropped


def _sound_text(name: str, value: str, grammar: MetricGrammar, sound: set) -> bool:
    """A text metric reads as text; a breakdown's (a list of the metrics it is made of) as names,
    each list checked once per report (`sound`: every launch of a section repeats the same lists)."""
    if name.startswith("breakdown:"):
        if value in sound:
            return True
        if not all(_name_damage(part, grammar) is None for part in value.split(",")):
            return False
        sound.add(value)
        return True
    return readable_text(value)


def action_metrics(action, access: MetricAccess, grammar: MetricGrammar, sound: set
                   ) -> Tuple[Dict[str, list], Dict[str, str]]:
    """({metric name: [value, unit]} for every sound metric of one launch, {dropped name: why}).
    A metric whose name or text is damaged is dropped, the launch kept; a listed metric that is not
    stored, or a launch with no sound metric left, is a damaged launch."""
    out = {}
    by_name, kind, unit, readers = access.by_name, access.kind, access.unit, access.readers
    with library_call():  # once per launch, not per metric: 30k metrics would pay ~0.3 s for it
        names, dropped = _metric_names(action, grammar, sound)
        for name in names:
            metric = by_name(action, name)
            if metric is None:
                raise DamagedLaunch(f"metric {name} is listed but not stored")
            value = readers[kind(metric)](metric)
            if value.__class__ is str and not _sound_text(name, value, grammar, sound):
                dropped[name] = "its text is damaged"
                continue
            label = unit(metric)
            if label.__class__ is str:
                label = sys.intern(label)
            # One object per distinct name and unit in the process, not one per launch: every launch
            # repeats the same ~2,000 names and a few dozen units (13 + 2 MB of the H200 report's 38 MB
            # of metrics were copies of them), and a pickle of a stretch then holds each once.
            key = sys.intern(name) if name.__class__ is str else name
            out[key] = [None if value != value else value, label]  # NaN -> null, as JSON has it
    if dropped and not out:
        raise DamagedLaunch("no sound metric: " + _dropped_text(dropped))
    return out, dropped


def _dropped_text(dropped: Dict[str, str], most: int = 3) -> str:
    """'metric NAME (why), ...' of the first few dropped metrics."""
    shown = lambda name: name[:80] if METRIC_NAME.fullmatch(name) else repr(name)[:80]  # noqa: E731
    parts = [f"metric {shown(str(name))} ({why})" for name, why in list(dropped.items())[:most]]
    if len(dropped) > most:
        parts.append(f"{len(dropped) - most} more")
    return ", ".join(parts)


def action_rules(action) -> List[dict]:
    rules = []
    with library_call():
        results = action.rule_results_as_dicts()
    for d in results:
        message = d.get("rule_message") or {}
        speedup = d.get("speedup_estimation") or {}
        rules.append({
            "rule": d.get("rule_identifier", ""),
            "name": d.get("name", ""),
            "section": d.get("section_identifier", ""),
            "type": message.get("type"),
            "title": message.get("title", ""),
            "message": message.get("message", ""),
            "speedup_type": {1: "global", 2: "local"}.get(speedup.get("type"), ""),
            "estimated_speedup_pct": speedup.get("speedup", math.nan),
        })
    if not all(readable_text(v) for rule in rules for v in rule.values() if isinstance(v, str)):
        raise DamagedLaunch("a rule result holds unreadable text")
    return rules


# -- source counters: the instructions with the most sampled warp stalls (issue 17) -----------------
HOTSPOTS = "ncu_source_hotspots"  # the summary table's name (docs/FORMAT.md)
TOP_INSTRUCTIONS = 10  # instructions kept per launch
TOP_REASONS = 3  # stall reasons kept per instruction
STALL_SAMPLE_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
SAMPLE_COUNT = "smsp__pcsamp_sample_count"  # collected with the stall samples (SourceCounters)


def stall_samples_by_address(action, names: List[str]) -> Dict[int, Dict[str, int]]:
    """{instruction address: {stall reason: samples}} from the per-instruction instances of the
    sampled stall reasons (all samples: the `_not_issued` subsets are left out)."""
    by_address: Dict[int, Dict[str, int]] = {}
    for name in names:
        if not name.startswith(STALL_SAMPLE_PREFIX) or name.endswith("_not_issued"):
            continue
        metric = action.metric_by_name(name)
        if metric is None or not metric.has_correlation_ids():
            continue
        addresses, reason = metric.correlation_ids(), name[len(STALL_SAMPLE_PREFIX):]
        for i in range(metric.num_instances()):
            samples = metric.as_uint64(i)
            if samples:
                by_address.setdefault(addresses.as_uint64(i), {})[reason] = samples
    return by_address


def top_addresses(by_address: Dict[int, Dict[str, int]], top: int) -> List[Tuple[int, int]]:
    """[(address, samples)] of the `top` instructions with most samples (lower address on ties)."""
    totals = ((address, sum(reasons.values())) for address, reasons in by_address.items())
    return sorted(totals, key=lambda pair: (-pair[1], pair[0]))[:top]


def instruction_text(action, address: int) -> Tuple[str, str, int]:
    """(SASS text, source file, line) at an address; "" and 0 where the report has no SASS or no
    line information.  Asked only for the top addresses: the first SASS lookup of a report
    disassembles its code (0.3-1 s), which reports without samples never pay."""
    sass = (action.sass_by_pc(address) or "").strip()
    info = action.source_info(address)
    file, line = (info.file_name() or "", int(info.line() or 0)) if info is not None else ("", 0)
    if not readable_text(sass) or not readable_text(file):
        raise DamagedLaunch(f"its SASS or source file name at {address:#x} is not readable text")
    return sass, file, line


def hotspot_row(launch_id: int, rank: int, address: int, samples: int, reasons: Dict[str, int],
                text: Tuple[str, str, int]) -> dict:
    row = {"launch_id": launch_id, "rank": rank, "address": address, "sass": text[0],
           "source_file": text[1], "source_line": text[2], "samples": samples}
    ranked = sorted(reasons.items(), key=lambda pair: (-pair[1], pair[0]))
    for i in range(TOP_REASONS):
        reason, count = ranked[i] if i < len(ranked) else ("", 0)
        row[f"stall_{i + 1}"], row[f"stall_{i + 1}_samples"] = reason, count
    return row


NO_TEXT = ("", "", 0)  # a hotspot's (SASS, source file, line) before its SASS is looked up


def source_hotspots(action, launch_id: int, raw: Dict[str, list], top: int = TOP_INSTRUCTIONS,
                    code: str = "", disassembled: Optional[Dict[str, object]] = None,
                    sass: bool = True) -> List[dict]:
    """The launch's `top` instructions by sampled warp stalls (hotspot_row), [] for a launch
    without stall sampling (the SourceCounters section not collected).

    disassembled: {code: the first launch of that code asked for SASS}, shared by the report's
    launches.  ncu_report disassembles a launch's code on its first SASS lookup (~40 ms, ~30 MB kept
    per kernel on the H200 report: 1 s and 440 MB over 58 launches of 15 kernels).  The addresses
    are the profiled process' absolute ones, so a kernel (code: its mangled name) has one instruction
    at an address in every launch of the report: the launch that disassembled it answers for the
    others, and each kernel is disassembled once.  sass=False leaves the text to the caller
    (NO_TEXT): the worker processes look it up for the whole report at the end (ncu_workers.py)."""
    if SAMPLE_COUNT not in raw:  # one lookup: a launch without samples costs nothing more
        return []
    source = action if disassembled is None or not code else disassembled.setdefault(code, action)
    with library_call():
        by_address = stall_samples_by_address(action, list(raw))
        return [hotspot_row(launch_id, rank, address, samples, by_address[address],
                            instruction_text(source, address) if sass else NO_TEXT)
                for rank, (address, samples) in enumerate(top_addresses(by_address, top), start=1)]


SECTIONS_TABLE = "ncu_report_sections"  # the summary table's name (docs/FORMAT.md)


def section_rows(action) -> List[dict]:
    """One row per metric of each section ncu_report lists for the launch: its id, title, order,
    description, part (header / body), position and the metric's name and label.  `regex:` entries
    are patterns of a section file, not metrics: left out."""
    out = []
    if not hasattr(action, "sections"):  # ncu_report before 2026.x (Nsight Compute 2025.3's extras/python has none)
        return out
    with library_call():
        for section in action.sections():
            about = {"section_id": section.identifier(), "title": section.name(), "order": int(section.order()),
                     "parent_id": section.parent_identifier() or "", "description": section.description() or ""}
            for part, metrics in (("header", section.header_metrics()), ("body", section.body_metrics())):
                for position, metric in enumerate(metrics):
                    name = metric.name()
                    if not name.startswith("regex:"):
                        out.append({**about, "part": part, "position": position, "metric": name,
                                    "label": metric.label() or name})
    if not all(readable_text(v) for row in out for v in row.values() if isinstance(v, str)):
        raise DamagedLaunch("a section's title or metric label is not readable text")
    return out


@dataclasses.dataclass
class Launches:
    """The launches ncu_report read: the sound ones' rows, raw metrics and rules, and the damaged
    ones (index in the report, 0-based -> what is damaged)."""

    rows: List[dict] = dataclasses.field(default_factory=list)
    raws: List[dict] = dataclasses.field(default_factory=list)
    rules: List[list] = dataclasses.field(default_factory=list)
    peaks: List[dict] = dataclasses.field(default_factory=list)  # ncu_metrics.kernel_peaks of each sound launch
    damaged: Dict[int, str] = dataclasses.field(default_factory=dict)
    hotspots: List[dict] = dataclasses.field(default_factory=list)  # source_hotspots of the sound launches
    sections: List[dict] = dataclasses.field(default_factory=list)  # section_rows of each range's first sound launch
    count: int = 0  # launches the library gave, sound or not
    dropped: Dict[int, Dict[str, str]] = dataclasses.field(default_factory=dict)  # sound launch -> {metric: why}
    positions: List[tuple] = dataclasses.field(default_factory=list)  # (range id, action index) of each sound launch

    def dropped_note(self) -> List[str]:
        """The run's note listing the metrics dropped as damaged, per launch ([] when none was)."""
        if not self.dropped:
            return []
        total = sum(len(d) for d in self.dropped.values())
        return [f"{total} damaged metric(s) left out, their launches kept: " + "; ".join(
            f"launch {launch}: {_dropped_text(dropped)}" for launch, dropped in sorted(self.dropped.items())[:5])
            + (f"; {len(self.dropped) - 5} more launches" if len(self.dropped) > 5 else "")]


def other_names(action, ncu_report) -> Dict[str, str]:
    """The launch's demangled and mangled kernel names."""
    with library_call():
        names = {"demangled_name": action.name(ncu_report.IAction.NameBase_DEMANGLED),
                 "mangled_name": action.name(ncu_report.IAction.NameBase_MANGLED)}
    if not all(readable_text(v or "") for v in names.values()):
        raise DamagedLaunch("its demangled or mangled kernel name is not readable text")
    return names


def read_launch(action, launch_id: int, range_id: int, ncu_report, access: MetricAccess,
                grammar: MetricGrammar, sound: set) -> Tuple[dict, dict, list, dict, dict]:
    """(kernels row, raw metrics, rule results, peaks, dropped metrics) of one launch, or DamagedLaunch."""
    name = launch_name(action, ncu_report)
    raw, dropped = action_metrics(action, access, grammar, sound)
    values = {k: v[0] for k, v in raw.items()}
    row = ncu_metrics.kernel_fields(values)
    row.update(launch_id=launch_id, range_id=range_id, name=name, **other_names(action, ncu_report))
    return row, raw, action_rules(action), ncu_metrics.kernel_peaks(values), dropped


def check_metric_count(name_ids: Dict[int, Tuple[int, Optional[int]]], launch: int, listed: int) -> None:
    """DamagedLaunch unless ncu_report listed as many metrics as the launch's record holds results
    (name_ids: ncu_rep.Container.name_ids, what the container's bytes say of each launch), each
    under its own name id."""
    if launch not in name_ids:
        return
    held, shared = name_ids[launch]
    if listed != held:
        raise DamagedLaunch(f"ncu_report lists {listed} of the {held} metrics its record holds")
    if shared is not None:
        raise DamagedLaunch(f"two different metric results carry name id {shared}")


def report_actions(ctx, first: int = 0, last: Optional[int] = None):
    """(launch id, range id, the range, action index) of the report's launches `first` <= id < `last`
    (last None: to the end), in report order; counting them materialises no launch."""
    launch_id = 0
    for range_id in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(range_id)
        actions = rng.num_actions()
        for action_id in range(actions):
            if launch_id >= first and (last is None or launch_id < last):
                yield launch_id, range_id, rng, action_id
            launch_id += 1


def count_actions(ctx) -> int:
    return sum(ctx.range_by_idx(r).num_actions() for r in range(ctx.num_ranges()))


def read_launches(ctx, ncu_report, name_ids: Dict[int, Tuple[int, Optional[int]]],
                  first: int = 0, last: Optional[int] = None, sass: bool = True) -> Launches:
    """The launches `first` <= id < `last` of an open report (the whole report by default), each
    checked against what the container says of it (name_ids).  Launches.count is every launch the
    library gives, read or not; positions holds where each sound one is (for a later SASS lookup)."""
    launches = Launches()
    access, grammar, sound = MetricAccess.of(ncu_report), MetricGrammar.of(ncu_report), set()
    sections_read, section_keys, disassembled = set(), set(), {}
    for launch_id, range_id, rng, action_id in report_actions(ctx, first, last):
        action = rng.action_by_idx(action_id)
        try:
            row, raw, rules, peaks, dropped = read_launch(action, launch_id, range_id, ncu_report, access,
                                                          grammar, sound)
            check_metric_count(name_ids, launch_id, len(raw) + len(dropped))
            hotspots = source_hotspots(action, launch_id, raw, code=row.get("mangled_name") or "",
                                       disassembled=disassembled, sass=sass)
            # A range's launches share the sections chosen at capture: read once per range
            # (ISection costs ~2 ms a launch: 0.2 s on a 105-launch report)
            sections = section_rows(action) if range_id not in sections_read else []
        except DamagedLaunch as e:
            launches.damaged[launch_id] = str(e)
            continue
        sections_read.add(range_id)
        launches.sections.extend(r for r in sections if (r["section_id"], r["part"], r["metric"]) not in section_keys)
        section_keys.update((r["section_id"], r["part"], r["metric"]) for r in sections)
        launches.hotspots.extend(hotspots)
        launches.rows.append(row)
        launches.raws.append(raw)
        launches.rules.append(rules)
        launches.peaks.append(peaks)
        launches.positions.append((range_id, action_id))
        if dropped:
            launches.dropped[launch_id] = dropped
    launches.count = count_actions(ctx)
    return launches
