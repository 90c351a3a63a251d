"""`trnsim monitor` speaks neuron-monitor: its document validated against a schema written from
neuron-monitor's user guide, read by a rewrite of the parsing logic of AWS's Prometheus exporter
(neuron-monitor-prometheus.py), and configured by neuron-monitor's `-c` file."""
import json
import os

import pytest
from click.testing import CliRunner

from tests.cli.kernels import MATMUL_EXP
from trnsim import live
from trnsim.cli import cli
from trnsim.errors import TrnsimError

jsonschema = pytest.importorskip("jsonschema")

# --- the schema, from the user guide's "JSON output format" and each metric group's section ---------------
_GROUP = {"type": "object", "required": ["period", "error"],
          "properties": {"period": {"type": "number", "minimum": 0}, "error": {"type": "string"}}}
_USAGE = {"type": "object", "required": ["user", "nice", "system", "idle", "io_wait", "irq", "soft_irq"],
          "additionalProperties": {"type": "number"}}
_CORE_MEMORY = {"type": "object", "required": ["constants", "model_code", "model_shared_scratchpad", "runtime_memory",
                                               "tensors"], "additionalProperties": {"type": "integer", "minimum": 0}}
_LATENCY = {"oneOf": [{"type": "null"}, {
    "type": "object", "required": ["p0", "p1", "p25", "p50", "p75", "p99", "p100"], "additionalProperties": False,
    "patternProperties": {"^p[0-9]+$": {"type": "number", "minimum": 0}}}]}
_COUNTS = {"type": "integer", "minimum": 0}
SCHEMA = {
    "type": "object",
    "required": ["neuron_runtime_data", "system_data", "instance_info", "neuron_hardware_info"],
    "properties": {
        "neuron_runtime_data": {"type": "array", "items": {
            "type": "object", "required": ["pid", "neuron_runtime_tag", "error", "report"],
            "properties": {
                "pid": {"type": "integer"}, "neuron_runtime_tag": {"type": "string"}, "error": {"type": "string"},
                "report": {"type": "object", "properties": {
                    "neuroncore_counters": {"allOf": [_GROUP, {"required": ["neuroncores_in_use"], "properties": {
                        "neuroncores_in_use": {"type": "object", "propertyNames": {"pattern": "^[0-9]+$"},
                                               "additionalProperties": {
                                                   "type": "object", "required": ["neuroncore_utilization"],
                                                   "properties": {"neuroncore_utilization": {
                                                       "type": "number", "minimum": 0, "maximum": 100},
                                                       "flops": {"type": "number", "minimum": 0}}}}}}]},
                    "memory_used": {"allOf": [_GROUP, {"required": ["neuron_runtime_used_bytes"], "properties": {
                        "neuron_runtime_used_bytes": {
                            "type": "object", "required": ["host", "neuron_device", "usage_breakdown"],
                            "properties": {
                                "host": {"type": "integer"}, "neuron_device": {"type": "integer"},
                                "usage_breakdown": {"type": "object", "required": ["host", "neuroncore_memory_usage"],
                                                    "properties": {
                                    "host": {"type": "object", "required": ["application_memory", "constants",
                                                                            "dma_buffers", "tensors"]},
                                    "neuroncore_memory_usage": {"type": "object",
                                                                "propertyNames": {"pattern": "^[0-9]+$"},
                                                                "additionalProperties": _CORE_MEMORY}}}}},
                        "loaded_models": {"type": "array"}}}]},
                    "neuron_runtime_vcpu_usage": {"allOf": [_GROUP, {"required": ["vcpu_usage"], "properties": {
                        "vcpu_usage": {"type": "object", "required": ["user", "system"]}}}]},
                    "execution_stats": {"allOf": [_GROUP, {
                        "required": ["error_summary", "execution_summary", "latency_stats"], "properties": {
                            "error_summary": {"type": "object", "additionalProperties": False, "required": [
                                "generic", "numerical", "transient", "model", "runtime", "hardware"],
                                "properties": {k: _COUNTS for k in ("generic", "numerical", "transient", "model",
                                                                    "runtime", "hardware")}},
                            "execution_summary": {"type": "object", "additionalProperties": False, "required": [
                                "completed", "completed_with_err", "completed_with_num_err", "timed_out",
                                "incorrect_input", "failed_to_queue"], "properties": {
                                    k: _COUNTS for k in ("completed", "completed_with_err", "completed_with_num_err",
                                                         "timed_out", "incorrect_input", "failed_to_queue")}},
                            "latency_stats": {"type": "object", "required": ["total_latency", "device_latency"],
                                              "properties": {"total_latency": _LATENCY, "device_latency": _LATENCY}}}}]},
                }}}}},
        "system_data": {"type": "object", "properties": {
            "vcpu_usage": {"allOf": [_GROUP, {"required": ["average_usage", "usage_data", "context_switch_count"],
                                              "properties": {"average_usage": _USAGE,
                                                             "usage_data": {"type": "object",
                                                                            "additionalProperties": _USAGE}}}]},
            "memory_info": {"allOf": [_GROUP, {"required": ["memory_total_bytes", "memory_used_bytes",
                                                            "swap_total_bytes", "swap_used_bytes"]}]},
            "neuron_hw_counters": {"allOf": [_GROUP, {"required": ["neuron_devices"], "properties": {
                "neuron_devices": {"type": "array", "items": {"type": "object", "required": [
                    "neuron_device_index", "mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected",
                    "sram_ecc_uncorrected"]}}}}]}}},
        "instance_info": {"type": "object", "required": ["instance_id", "instance_type", "instance_availability_zone",
                                                         "subnet_id", "error"]},
        "neuron_hardware_info": {"type": "object", "required": [
            "neuron_device_type", "neuroncore_version", "neuron_device_count", "neuron_device_memory_size",
            "neuroncore_per_device_count", "logical_neuroncore_config", "error"],
            "properties": {"neuron_device_count": {"type": "integer", "minimum": 1},
                           "neuroncore_per_device_count": {"type": "integer", "minimum": 1}}},
    },
}


# --- the exporter's parsing logic, rewritten: the series it would set from one document ------------------
def exporter_series(doc: dict, errors: list) -> dict:
    """What neuron-monitor-prometheus.py derives from one document: {(metric, sorted labels): value}.
    Its rules: instance labels from instance_info; per runtime (skipped if its "error" is set) and for
    system_data, each metric group with an empty "error" goes to its handler, else an error line; the
    hardware info becomes labels of the neuron_hardware info metric."""
    info = doc["instance_info"]
    inst = {"instance_name": info["instance_name"], "instance_id": info["instance_id"],
            "instance_type": info["instance_type"], "availability_zone": info["instance_availability_zone"],
            "region": info["instance_region"], "subnet_id": info["subnet_id"]}
    out = {}

    def put(metric, labels, value):
        out[(metric, tuple(sorted((k, str(v)) for k, v in labels.items())))] = value

    def neuroncore_counters(d, lab):
        for nc, c in d["neuroncores_in_use"].items():
            put("neuroncore_utilization_ratio", {**lab, "neuroncore": int(nc)}, c["neuroncore_utilization"] / 100)
            if "flops" in c:
                put("neuroncore_flops", {**lab, "neuroncore": int(nc)}, c["flops"])

    def neuron_runtime_vcpu_usage(d, lab):
        for kind in ("user", "system"):
            put("neuron_runtime_vcpu_usage_ratio", {**lab, "usage_type": kind}, d["vcpu_usage"][kind] / 100)

    def memory_used(d, lab):
        used = d["neuron_runtime_used_bytes"]
        for where in ("host", "neuron_device"):
            put("neuron_runtime_memory_used_bytes", {**lab, "memory_location": where}, used[where])
        for kind in ("constants", "model_code", "model_shared_scratchpad", "runtime_memory", "tensors"):
            for nc, m in used["usage_breakdown"]["neuroncore_memory_usage"].items():
                put(f"neuroncore_memory_usage_{kind}", {**lab, "neuroncore": int(nc)}, m[kind])

    def execution_stats(d, lab):
        for kind, n in d["error_summary"].items():
            put("execution_errors_total", {**lab, "error_type": kind}, n)
        for kind, n in d["execution_summary"].items():
            put("execution_status_total", {**lab, "status_type": kind}, n)
        if d["latency_stats"]["total_latency"] is not None:
            for pct, v in d["latency_stats"]["total_latency"].items():
                put("execution_latency_seconds", {**lab, "percentile": pct}, v)

    def neuron_hw_counters(d, lab):
        for dev in d["neuron_devices"]:
            for kind in ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected"):
                put("hardware_ecc_events_total", {**lab, "event_type": kind,
                                                  "neuron_device_index": dev["neuron_device_index"]}, dev[kind])

    def vcpu_usage(d, lab):
        put("system_vcpu_count", lab, len(d["usage_data"]))
        avg = d["average_usage"]
        for kind, parts in (("user", ("user", "nice")), ("system", ("system", "io_wait", "irq", "soft_irq"))):
            put("system_vcpu_usage_ratio", {**lab, "usage_type": kind}, min(sum(avg[p] for p in parts), 100) / 100)

    def memory_info(d, lab):
        for src, dst in (("memory", "system_memory"), ("swap", "system_swap")):
            for stat in ("total_bytes", "used_bytes"):
                put(f"{dst}_{stat}", lab, d[f"{src}_{stat}"])

    handlers = {f.__name__: f for f in (neuroncore_counters, neuron_runtime_vcpu_usage, memory_used, execution_stats,
                                         neuron_hw_counters, vcpu_usage, memory_info)}

    def report(entries, lab, tag=None):
        for group, data in entries.items():
            if group in handlers:
                if data["error"] == "":
                    handlers[group](data, dict(lab))
                else:
                    errors.append((tag, group, data["error"]))

    for rt in doc.get("neuron_runtime_data") or []:
        if rt["error"] != "":
            errors.append((rt["neuron_runtime_tag"], "runtime", rt["error"]))
            continue
        report(rt["report"], {**inst, "runtime_tag": rt["neuron_runtime_tag"]}, rt["neuron_runtime_tag"])
    if doc["system_data"] is not None:
        report(doc["system_data"], inst)
    hw = doc["neuron_hardware_info"]
    put("neuron_hardware_info", {**inst, "neuron_device_count": str(hw["neuron_device_count"]),
                                 "neuroncore_per_device_count": str(hw["neuroncore_per_device_count"])}, 1)
    return out


@pytest.fixture
def published(tmp_path, monkeypatch):
    """This test process published as a simulating one: two cores of a trn2.48xlarge, 3,100 device bytes."""
    monkeypatch.setenv("TRNSIM_RUNTIME_DIR", str(tmp_path))
    pid = os.getpid()
    state = {"pid": pid, "start": live._start_ticks(pid), "command": "python train.py", "kind": "kernel",
             "name": "matmul", "phase": "timing", "instance": "trn2.48xlarge", "cores": [0, 1],
             "utilisation": {"0": 0.5, "1": 0.25}, "busy": {"0": {"TensorE": 0.5}, "1": {"DMA": 0.25}},
             "memory": {"hbm": 3000, "sbuf": 100}}
    (tmp_path / f"{pid}.json").write_text(json.dumps(state))
    return pid


def _monitor(*args, env=None):
    r = CliRunner(env=env).invoke(cli, ["monitor", "--count", "1", "--interval", "0.05", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_the_document_matches_neuron_monitors_schema(published):
    doc = _monitor()
    jsonschema.validate(doc, SCHEMA)
    hw = doc["neuron_hardware_info"]
    assert (hw["neuron_device_count"], hw["neuroncore_per_device_count"], hw["logical_neuroncore_config"]) == (16, 4, 2)
    assert hw["neuron_device_type"] == "trainium2" and hw["neuroncore_version"] == "v3d"
    assert hw["neuron_device_memory_size"] == 96 * 2**30
    (rt,) = doc["neuron_runtime_data"]
    assert rt["neuron_runtime_tag"] == str(published)
    assert set(rt["report"]) == {"neuroncore_counters", "memory_used", "neuron_runtime_vcpu_usage", "execution_stats"}
    assert set(doc["system_data"]) == {"vcpu_usage", "memory_info", "neuron_hw_counters"}


def test_the_prometheus_exporters_logic_reads_it(published):
    errors = []
    series = exporter_series(_monitor(), errors)
    tag = str(published)

    def get(metric, **labels):
        return [v for (m, lab), v in series.items() if m == metric and {k: str(x) for k, x in labels.items()}.items()
                <= dict(lab).items()]

    assert get("neuroncore_utilization_ratio", neuroncore=0, runtime_tag=tag) == [0.5]
    assert get("neuroncore_utilization_ratio", neuroncore=1, runtime_tag=tag) == [0.25]
    assert get("neuron_runtime_memory_used_bytes", memory_location="neuron_device") == [3100]
    assert sum(get("neuroncore_memory_usage_tensors", runtime_tag=tag)) == 3100  # the breakdown adds up
    assert get("neuroncore_memory_usage_model_code", neuroncore=1) == [0]
    assert get("system_vcpu_count") == [os.cpu_count()]
    assert len(get("hardware_ecc_events_total", event_type="mem_ecc_corrected")) == 16
    assert get("neuron_hardware_info", neuron_device_count=16, neuroncore_per_device_count=4,
               instance_type="trn2.48xlarge") == [1]
    # this process launched no kernel: every group reads without error, the counts are zeros, no latency
    assert errors == []
    assert get("execution_status_total", runtime_tag=tag, status_type="completed") == [0]
    assert not get("execution_latency_seconds", runtime_tag=tag)


def test_logical_nc_config_from_the_environment(published):
    hw = _monitor(env={"NEURON_LOGICAL_NC_CONFIG": "1"})["neuron_hardware_info"]
    assert (hw["neuroncore_per_device_count"], hw["logical_neuroncore_config"], hw["neuroncore_version"]) == (8, 1, "v3")
    r = CliRunner(env={"NEURON_LOGICAL_NC_CONFIG": "3"}).invoke(cli, ["monitor", "--count", "1"])
    assert r.exit_code == 2 and "NEURON_LOGICAL_NC_CONFIG=3: Trainium2 takes 1 or 2" in r.stderr


def test_a_config_file_chooses_groups_tags_and_period(published, tmp_path):
    conf = tmp_path / "monitor.conf"
    conf.write_text(json.dumps({"period": "2s", "neuron_runtimes": [
        {"tag_filter": f"^{published}$", "metrics": [{"type": "neuroncore_counters"}, {"type": "memory_used"}]}],
        "system_metrics": [{"type": "memory_info", "period": "100ms"}]}))
    import time

    t0 = time.monotonic()
    doc = _monitor("-c", str(conf), "--interval", "0.05")
    (rt,) = doc["neuron_runtime_data"]
    assert set(rt["report"]) == {"neuroncore_counters", "memory_used"} and set(doc["system_data"]) == {"memory_info"}
    jsonschema.validate(doc, SCHEMA)
    conf.write_text(json.dumps({"neuron_runtimes": [{"tag_filter": "^nothing$", "metrics": [
        {"type": "neuroncore_counters"}]}], "system_metrics": [{"type": "memory_info", "period": "200ms"}]}))
    r = CliRunner().invoke(cli, ["monitor", "-c", str(conf), "--count", "1"])
    assert json.loads(r.stdout)["neuron_runtime_data"] == [] and r.exit_code == 0
    assert time.monotonic() - t0 < 3  # the configuration's 200 ms, not the default 5 s


@pytest.mark.parametrize("text, message", [
    ('{"period": "1s",\n "system_metrics": [{"type": "gpu_usage"}]}', "unknown metric group type 'gpu_usage'"),
    ('{"period": "soon"}', "period 'soon' is not a duration"),
    ('{"period": "1s",\n  "neuron_runtimes": [}', ":2: not JSON"),
    ('{"neuron_runtimes": [{"tag_filter": "(", "metrics": []}]}', "tag_filter is not a regular expression"),
])
def test_a_bad_config_file_is_named(tmp_path, text, message):
    conf = tmp_path / "bad.conf"
    conf.write_text(text)
    r = CliRunner().invoke(cli, ["monitor", "-c", str(conf), "--count", "1"])
    assert r.exit_code == 2 and message in r.stderr and "Traceback" not in r.output, r.output




def test_execution_stats_and_flops_come_from_the_kernels_this_process_ran(tmp_path, monkeypatch):
    """Three timed launches of a real matmul (N = 128, 256, 512) and one launch the hardware refuses: the
    next document counts 3 completed and 1 completed_with_err (a model error), gives the latency percentiles
    of the three timed runs (nearest rank: p0 the fastest, p50 the middle one, p100 the slowest, in seconds)
    and each core's FLOP/s as the FLOPs of the runs over their simulated time; the exporter's logic reads
    them all. The document after that, with nothing run in between, counts zeros."""
    import importlib.util

    import numpy as np

    import trnsim

    monkeypatch.setenv("TRNSIM_RUNTIME_DIR", str(tmp_path))
    path = tmp_path / "mm.py"
    path.write_text(MATMUL_EXP)
    spec = importlib.util.spec_from_file_location("mm_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    live.idle()  # this process's totals so far, written in this test's folder ...
    _monitor()  # ... and read: what ran before this test is not counted below
    results = [trnsim.benchmark(mod.matmul_exp, np.ones((128, 128), np.float32), np.ones((128, n), np.float32),
                                target="trn2") for n in (128, 256, 512)]
    with pytest.raises(TrnsimError):  # a stationary of 256 rows: more than the PE array's 128 partitions
        mod.matmul_exp(np.ones((256, 128), np.float32), np.ones((256, 128), np.float32))
    live.idle()  # writes the state now (a process's file is otherwise rewritten at most every 0.25 s)
    doc = _monitor()
    jsonschema.validate(doc, SCHEMA)
    (rt,) = [r for r in doc["neuron_runtime_data"] if r["pid"] == os.getpid()]
    stats = rt["report"]["execution_stats"]
    assert stats["error"] == ""
    assert stats["execution_summary"]["completed"] == 3 and stats["execution_summary"]["completed_with_err"] == 1
    assert stats["error_summary"]["model"] == 1 and sum(stats["error_summary"].values()) == 1
    total = sorted(r.latency * 1e-9 for r in results)
    device = sorted(r.period * 1e-9 for r in results)
    assert total[0] < total[1] < total[2]
    lat = stats["latency_stats"]
    assert (lat["total_latency"]["p0"], lat["total_latency"]["p50"], lat["total_latency"]["p100"]) == tuple(total)
    assert (lat["device_latency"]["p0"], lat["device_latency"]["p100"]) == (device[0], device[2])
    flops = 2 * 128 * 128 * (128 + 256 + 512)  # each matmul's multiply-adds, counted as two FLOPs
    seconds = sum(total)
    core = rt["report"]["neuroncore_counters"]["neuroncores_in_use"]["0"]
    assert core["flops"] == pytest.approx(flops / seconds, rel=1e-9)
    assert core["flops"] < trnsim.specs.neuroncore("trn2").peak_flops("bf16")  # fp32 runs below the bf16 peak
    errors = []
    series = exporter_series(doc, errors)
    tag = str(os.getpid())
    assert errors == []
    assert series[("execution_status_total", tuple(sorted({**_labels(doc), "runtime_tag": tag,
                                                             "status_type": "completed"}.items())))] == 3
    assert series[("execution_latency_seconds", tuple(sorted({**_labels(doc), "runtime_tag": tag,
                                                                "percentile": "p50"}.items())))] == total[1]
    again = _monitor()
    (rt,) = [r for r in again["neuron_runtime_data"] if r["pid"] == os.getpid()]
    stats = rt["report"]["execution_stats"]
    assert sum(stats["execution_summary"].values()) == 0 and stats["latency_stats"]["total_latency"] is None
    assert rt["report"]["neuroncore_counters"]["neuroncores_in_use"]["0"]["flops"] == 0


def _labels(doc):
    info = doc["instance_info"]
    return {"instance_name": info["instance_name"], "instance_id": info["instance_id"],
            "instance_type": info["instance_type"], "availability_zone": info["instance_availability_zone"],
            "region": info["instance_region"], "subnet_id": info["subnet_id"]}
