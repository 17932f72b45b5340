"""How a job's throughput is printed: slow local servers read as "1 per N s", never "0.0/s"."""

from workbench.services.judge.jobs import rate_text


def test_rates_from_one_per_second_up_print_per_second():
    assert rate_text(5000, 19.6) == "255.1/s"
    assert rate_text(3, 3.0) == "1.0/s"
    assert rate_text(19, 20.0) == "1 per 1.1 s"  # just under 1/s


def test_slow_rates_print_seconds_per_judgment():
    assert rate_text(8, 139.0) == "1 per 17 s"  # 0.058/s: llama.cpp on two busy cores
    assert rate_text(1, 12.0) == "1 per 12 s"
    assert rate_text(2, 5.0) == "1 per 2.5 s"
    assert rate_text(0, 30.0) == "none"
