"""Device timing's pure parts on the CPU: the noise estimate, the stop rule, the choice of sampler, the clock flag."""
import math
import random

import pytest
import torch

from adaln_bench.harness.measurement.device_time import (
    DeviceTimeError,
    StopRule,
    calls_for_span,
    clock_dropped,
    measure_device_time,
    relative_noise,
    run_measurement,
    sample_until_stable,
    warm_up,
)


class FakeClock:
    """A monotonic clock that advances only when a fake sample is taken."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeSampler:
    """Gaussian samples around `centre` µs with relative spread `rel_sd`; each costs `cost_s` of fake time."""

    def __init__(self, method, centre=150.0, rel_sd=0.01, seed=0, clock=None, cost_s=0.0, calls=7):
        self.method, self.calls, self.notes = method, calls, []
        self.rng, self.centre, self.rel_sd = random.Random(seed), centre, rel_sd
        self.clock, self.cost_s, self.requests = clock, cost_s, []

    def take(self, k):
        self.requests.append(k)
        if self.clock is not None:
            self.clock.now += k * self.cost_s
        return [self.rng.gauss(self.centre, self.centre * self.rel_sd) for _ in range(k)]


# --- the noise estimate ---------------------------------------------------------------------------


def test_relative_noise_is_the_half_width_of_the_medians_order_statistic_interval():
    # n = 20: ranks floor(10 - 1.96·√20/2) = 5 and ceil(11 + 1.96·√20/2) = 16 (1-based).
    samples = [100.0 + i for i in range(20)]  # sorted: rank r holds 99 + r
    expected = ((99 + 16) - (99 + 5)) / 2 / 109.5
    assert relative_noise(samples) == pytest.approx(expected)
    assert relative_noise(list(reversed(samples))) == pytest.approx(expected)


def test_relative_noise_shrinks_with_more_samples_and_ignores_a_slow_tail():
    rng = random.Random(1)
    few = [rng.gauss(100, 1) for _ in range(20)]
    many = [rng.gauss(100, 1) for _ in range(2000)]
    assert relative_noise(many) < relative_noise(few) / 4
    tailed = many[:-20] + [1e6] * 20  # 1 % of samples a thousand times slower
    assert relative_noise(tailed) < 2 * relative_noise(many)


def test_relative_noise_is_infinite_with_too_few_samples():
    assert relative_noise([1.0, 2.0, 3.0, 4.0]) == math.inf
    assert relative_noise([5.0] * 10) == 0.0


# --- the stop rule --------------------------------------------------------------------------------


def test_sampling_stops_once_the_noise_is_within_the_target():
    sampler = FakeSampler("cuda_graph", rel_sd=0.01)
    result = sample_until_stable(sampler.take, StopRule(target=0.005, min_samples=20, max_samples=5000, batch=10))
    assert result.stop_reason == "stable"
    assert result.rel_noise <= 0.005
    assert result.rel_noise == pytest.approx(relative_noise(result.samples_us))
    # It took one more batch than needed at most: without its last batch the noise was still too high.
    assert relative_noise(result.samples_us[:-10]) > 0.005
    assert sampler.requests[0] == 20 and set(sampler.requests[1:]) == {10}
    assert len(result.samples_us) == sum(sampler.requests)


def test_sampling_stops_at_the_sample_cap_with_the_noise_recorded():
    sampler = FakeSampler("queued", rel_sd=0.5)
    result = sample_until_stable(sampler.take, StopRule(target=0.005, min_samples=20, max_samples=95, batch=10))
    assert result.stop_reason == "max_samples"
    assert len(result.samples_us) == 95  # the last batch is cut to the cap
    assert result.rel_noise > 0.005


def test_sampling_stops_at_the_time_cap():
    clock = FakeClock()
    sampler = FakeSampler("queued", rel_sd=0.5, clock=clock, cost_s=1 / 64)  # exact in binary
    result = sample_until_stable(sampler.take, StopRule(min_samples=20, max_samples=10_000, max_seconds=1.0,
                                                        batch=10), clock=clock)
    assert result.stop_reason == "max_seconds"
    # 20 samples take 0.3125 s, each batch of 10 another 0.15625 s: after 4 batches 0.9375 s, after 5 1.09375 s.
    assert len(result.samples_us) == 70


def test_a_stop_rule_that_cannot_work_is_refused():
    with pytest.raises(ValueError):
        sample_until_stable(lambda k: [1.0] * k, StopRule(min_samples=2))


# --- choosing the sampler -------------------------------------------------------------------------


def _clock_reader(readings):
    it = iter(readings)
    return lambda: (next(it), "nvml")


def test_graph_first_and_its_samples_become_the_timing():
    graph = FakeSampler("cuda_graph", centre=140.0, rel_sd=0.002, calls=15)
    timing = run_measurement(lambda: None, "auto", StopRule(), lambda f: graph,
                             lambda f: pytest.fail("queued must not be used when capture works"),
                             _clock_reader([1980.0, 1980.0]))
    assert timing.method == "cuda_graph" and timing.calls_per_sample == 15
    assert timing.capture_error is None
    assert timing.median_us == pytest.approx(140.0, rel=0.01)
    # every sample taken is either kept or dropped by the warm-up (200 ms at 15 x 140 µs a sample: 100)
    assert len(timing.warmup_samples_us) == 100 and timing.warmup_ms == 200.0
    assert timing.samples_us and len(timing.samples_us) + len(timing.warmup_samples_us) == sum(graph.requests)
    assert timing.sm_clock_mhz_before == 1980.0 and timing.throttled is False


def test_a_capture_that_raises_falls_back_to_queued_and_says_why():
    def refuse(f):
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    queued = FakeSampler("queued", centre=300.0, rel_sd=0.002, calls=6)
    timing = run_measurement(lambda: None, "auto", StopRule(), refuse, lambda f: queued,
                             _clock_reader([1980.0, 1755.0]))
    assert timing.method == "queued"
    assert timing.capture_error == "RuntimeError: CUDA error: operation not permitted when stream is capturing"
    assert timing.throttled is True  # 1980 → 1755 MHz is an 11 % drop
    assert timing.sm_clock_mhz_after == 1755.0


def test_method_cuda_graph_reraises_a_failed_capture_and_unknown_methods_are_refused():
    def refuse(f):
        raise RuntimeError("capture failed")

    with pytest.raises(RuntimeError, match="capture failed"):
        run_measurement(lambda: None, "cuda_graph", StopRule(), refuse, lambda f: None, _clock_reader([None, None]))
    with pytest.raises(DeviceTimeError, match="unknown device-time method 'events'"):
        run_measurement(lambda: None, "events", StopRule(), refuse, refuse, _clock_reader([None, None]))


def test_method_queued_skips_the_capture():
    queued = FakeSampler("queued", rel_sd=0.002)
    timing = run_measurement(lambda: None, "queued", StopRule(),
                             lambda f: pytest.fail("no capture when queued is asked for"),
                             lambda f: queued, _clock_reader([None, None]))
    assert timing.method == "queued" and timing.throttled is None and timing.sm_clock_mhz_before is None


# --- the warm-up ----------------------------------------------------------------------------------


class SlowSpell:
    """A graph whose first `slow` samples read `slow_us` (the H200's spell after other work), then `fast_us`."""

    method = "cuda_graph"

    def __init__(self, slow=20, slow_us=134.6, fast_us=117.5, calls=17):
        self.calls, self.notes, self.slow, self.slow_us, self.fast_us, self.taken = calls, [], slow, slow_us, fast_us, 0

    def take(self, k):
        out = [self.slow_us if self.taken + i < self.slow else self.fast_us for i in range(k)]
        self.taken += k
        return out


def test_a_slow_spell_at_the_start_is_dropped_by_the_warm_up_not_measured():
    # What the harness met at T = 1 (git:NOTES.md §5 item 6): all 20 samples of the slow spell were kept before.
    spell = SlowSpell(slow=20)
    before = run_measurement(lambda: None, "auto", StopRule(warmup_ms=0.0), lambda f: spell, None,
                             _clock_reader([1980.0, 1980.0]))
    assert before.median_us == 134.6 and before.warmup_samples_us == []
    spell = SlowSpell(slow=20)
    timing = run_measurement(lambda: None, "auto", StopRule(), lambda f: spell, None, _clock_reader([1980.0, 1980.0]))
    assert timing.median_us == 117.5 and set(timing.samples_us) == {117.5}
    # 200 ms of GPU time at 17 calls a sample: whole batches of 10 until the sum passes it
    assert len(timing.warmup_samples_us) == 100 and timing.warmup_samples_us[:20] == [134.6] * 20


def test_the_warm_up_counts_each_callables_own_gpu_time_and_stops_at_the_sample_cap():
    taken = {"fast": 0, "slow": 0}

    def taker(name, us):
        def take(k):
            taken[name] += k
            return [us] * k
        return take

    rule = StopRule(warmup_ms=10.0, batch=5, min_samples=5, max_samples=40)
    # fast: 100 µs x 10 calls = 1 ms a sample -> 10 samples; slow: 1 ms x 1 call -> 10 as well; tiny: capped
    dropped = warm_up({"fast": taker("fast", 100.0), "slow": taker("slow", 1000.0)}, {"fast": 10, "slow": 1}, rule)
    assert {k: len(v) for k, v in dropped.items()} == {"fast": 10, "slow": 10} == taken
    dropped = warm_up({"tiny": lambda k: [1.0] * k}, {"tiny": 1}, rule)
    assert len(dropped["tiny"]) == 40  # 40 µs of 10 ms: the sample cap, not an endless loop
    assert warm_up({"x": lambda k: pytest.fail("no warm-up asked")}, {"x": 1}, StopRule(warmup_ms=0.0)) == {"x": []}


# --- small helpers --------------------------------------------------------------------------------


def test_calls_per_sample_span_about_two_milliseconds():
    assert calls_for_span(145.0) == 14  # ceil(2000 / 145)
    assert calls_for_span(4600.0) == 1
    assert calls_for_span(0.5) == 256  # capped
    assert calls_for_span(0.0) == 256


def test_clock_drop_flag():
    assert clock_dropped(1980.0, 1965.0) is False  # one 15 MHz step is not throttling
    assert clock_dropped(1980.0, 1900.0) is True
    assert clock_dropped(None, 1900.0) is None


def test_on_the_cpu_there_is_no_device_time():
    assert measure_device_time(lambda: None, torch.device("cpu")) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error where CUDA is missing")
def test_asking_for_cuda_device_time_without_cuda_is_a_clear_error():
    with pytest.raises(DeviceTimeError, match="device time needs CUDA"):
        measure_device_time(lambda: None, "cuda")


def _timing(method, samples, before=1980.0, after=1980.0, noise=0.004, error=None, warmup_ms=200.0):
    from adaln_bench.harness.measurement.device_time import DeviceTiming, clock_dropped, median

    return DeviceTiming(method=method, median_us=median(samples), samples_us=samples, rel_noise=noise,
                        stop_reason="stable", calls_per_sample=14, sm_clock_mhz_before=before,
                        sm_clock_mhz_after=after, sm_clock_source="nvml", throttled=clock_dropped(before, after),
                        capture_error=error, warmup_samples_us=[150.0] * 10, warmup_ms=warmup_ms)


def test_one_process_becomes_the_reports_device_time():
    from adaln_bench.harness.measurement.device_time import device_time_entry

    fwd = _timing("cuda_graph", [145.12345, 145.5, 146.0], before=1980.0, after=1980.0)
    fwd_bwd = _timing("queued", [480.0, 481.0, 482.0], before=1965.0, after=1800.0, noise=math.inf,
                      error="RuntimeError: cannot capture")
    entry = device_time_entry(fwd, fwd_bwd)
    assert entry.method == "cuda_graph" and entry.fwd_bwd_method == "queued"
    assert entry.fwd_us == 145.5 and entry.fwd_samples == [145.123, 145.5, 146.0]
    assert entry.fwd_bwd_us == 481.0 and entry.fwd_bwd_process_medians == [481.0]
    assert entry.fwd_rel_noise == 0.004 and entry.fwd_bwd_rel_noise is None  # infinity is not JSON
    assert entry.processes == 1
    assert (entry.sm_clock_mhz_before, entry.sm_clock_mhz_after) == (1965.0, 1800.0)
    assert entry.throttled is True and entry.capture_error == "RuntimeError: cannot capture"
    assert entry.warmup_ms == 200.0  # the setting goes into the report; the dropped samples do not
    assert "150.0" not in entry.model_dump_json()
    only_fwd = device_time_entry(fwd)
    assert only_fwd.fwd_bwd_us is None and only_fwd.throttled is False


def test_a_point_on_the_cpu_has_no_device_time():
    from adaln_bench.harness.measurement.device_time import device_time_point

    calls = []
    assert device_time_point(lambda: calls.append(1), lambda: calls.append(2), torch.device("cpu")) is None
    assert calls == []  # nothing was run for nothing


# --- the reference sampled beside the candidate ------------------------------------------------------


def test_paired_ratios_pair_round_by_round_or_not_at_all():
    from adaln_bench.harness.measurement.device_time import paired_ratios

    assert paired_ratios([120.0, 130.0], [100.0, 100.0]) == [1.2, 1.3]
    assert paired_ratios([120.0], [100.0, 100.0]) is None  # counts differ: not the same rounds
    assert paired_ratios([], []) is None and paired_ratios([1.0], [0.0]) is None


def test_a_point_is_sampled_beside_the_reference_and_keeps_its_ratio():
    from adaln_bench.harness.measurement.device_time import Reference, point_entry

    # A clock that drops halfway through moves both alike: the ratio stays 0.9 in every round.
    cand = _timing("cuda_graph", [108.0, 108.0, 126.0, 126.0])
    ref = _timing("cuda_graph", [120.0, 120.0, 140.0, 140.0])
    calls = []

    def interleaved(fns):
        calls.append(sorted(fns))
        return {"candidate": cand, "reference": ref}

    entry = point_entry(lambda: None, lambda: None, Reference("cuBLAS", lambda: None, lambda: None), "auto",
                        interleaved, alone=lambda fn: pytest.fail("nothing is measured alone"))
    assert calls == [["candidate", "reference"]] * 2  # forward, then forward + backward, each beside its own
    assert entry.fwd_us == 117.0 and entry.reference.fwd_us == 130.0
    assert entry.reference.fwd_ratio == 0.9 and entry.reference.fwd_bwd_ratio == 0.9
    assert entry.reference.fwd_samples == [120.0, 120.0, 140.0, 140.0] and entry.reference_error is None


def test_a_point_whose_capture_fails_beside_the_reference_is_measured_alone_and_says_why():
    from adaln_bench.harness.measurement.device_time import Reference, point_entry

    def interleaved(fns):
        raise RuntimeError("operation not permitted when stream is capturing")

    settled = []
    alone = _timing("queued", [300.0, 301.0, 302.0])
    entry = point_entry(lambda: None, None, Reference("cuBLAS", lambda: None), "auto", interleaved,
                        alone=lambda fn: alone, settle=lambda: settled.append(1))
    assert entry.method == "queued" and entry.fwd_us == 301.0 and entry.reference is None
    assert entry.reference_error == "RuntimeError: operation not permitted when stream is capturing"
    assert settled == [1]
    # Asked for queued timing, the reference is not attempted (it needs graphs).
    entry = point_entry(lambda: None, None, Reference("cuBLAS", lambda: None), "queued",
                        lambda fns: pytest.fail("no graphs when queued is asked for"), alone=lambda fn: alone)
    assert entry.reference is None and entry.reference_error is None
