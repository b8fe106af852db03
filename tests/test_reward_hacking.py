"""Gold rewards and the reward-hacking monitor: gold rewards are logged beside the training reward and never
change training; the monitor's check by hand; and a real tiny run in which a planted reward model (it scores
an answer with no reasoning highest: tests/support/planted_reward_model.py) is hacked, the monitor fires
within its patience, and stop_on_reward_hacking saves the last checkpoint from before the divergence."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from recipes import grpo
from recipes.common.command_line.config import parse_recipe_args
from recipes.common.training.monitor import RLVRMonitor, fitted_change
from tests.support.planted_reward_model import build_planted_reward_model

COLD_START = grpo.Path(__file__).resolve().parents[1] / "recipes" / "assets" / "tiny-cold-start"

# The demo's cold start on the levels it solves a quarter of the time, a learning rate that moves it in a
# few steps, one log per step.
RUN = [
    "--model_name_or_path", str(COLD_START), "--dataset_name", "synthetic:5-10", "--dataset_num_rows", "200",
    "--num_generations", "8", "--per_device_train_batch_size", "32", "--max_completion_length", "48",
    "--learning_rate", "1e-3", "--warmup_steps", "0", "--beta", "0", "--logging_steps", "1",
    "--monitor_patience", "3", "--use_cpu", "true", "--disable_tqdm", "true",
]  # fmt: skip


def parse(*argv: str):
    return parse_recipe_args(grpo.make_parser().dataclass_types, "demo/grpo.yaml", list(argv))


def logs(folder):
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def card(folder):
    return json.loads((folder / "run_card.json").read_text())


# ---------------------------------------------------------------- the check, by hand


def feed(monitor, points, main=True):
    """Log (proxy, gold) points at steps 1, 2, ... (on the main process or another); returns the control object
    the last log saw."""
    control = SimpleNamespace(should_training_stop=False)
    state = SimpleNamespace(is_world_process_zero=main, global_step=0)
    for step, (proxy, gold) in enumerate(points, start=1):
        state.global_step = step
        monitor.on_log(None, state, control, logs={"reward": proxy, "gold/math_accuracy": gold})
    return control


def hacking_monitor(tmp_path, **options):
    return RLVRMonitor(tmp_path, patience=3, gold_rewards=["math_accuracy"], **options)


def test_fitted_change_is_the_least_squares_rise_over_the_window():
    assert fitted_change([1, 2, 3], [0.0, 1.0, 2.0]) == pytest.approx(2.0)
    # y = 1, 0, 1, 0 at x = 0..3: slope -0.2 (by hand: sum (x-1.5)(y-0.5) = -1, sum (x-1.5)^2 = 5), over 3 steps
    assert fitted_change([0, 1, 2, 3], [1.0, 0.0, 1.0, 0.0]) == pytest.approx(-0.6)
    assert fitted_change([5, 5], [0.0, 1.0]) == 0.0


def test_the_monitor_fires_when_the_training_reward_rises_and_the_gold_falls(tmp_path):
    monitor = hacking_monitor(tmp_path)
    feed(monitor, [(0.1, 0.5), (0.3, 0.45), (0.5, 0.35), (0.7, 0.30)])
    assert [warning["kind"] for warning in monitor.warnings] == ["reward_hacking"]
    assert monitor.hacking["diverged_from"] == 1 and monitor.hacking["seen_at"] == 4
    message = monitor.warnings[0]["message"]
    assert "0.100 -> 0.700" in message and "0.500 -> 0.300" in message  # the numbers, first and last of the window


@pytest.mark.parametrize(
    "points",
    [
        [(0.1, 0.5), (0.3, 0.55), (0.5, 0.6), (0.7, 0.7)],  # both rise: learning
        [(0.7, 0.5), (0.5, 0.45), (0.3, 0.35), (0.1, 0.3)],  # both fall
        [(0.1, 0.5), (0.3, 0.49), (0.5, 0.48), (0.7, 0.47)],  # gold falls less than the margin
        [(0.1, 0.5), (0.3, 0.3), (0.5, 0.5), (0.7, 0.5)],  # one noisy dip that recovers: the fitted line rises
        [(0.1, 0.5), (0.3, 0.3)],  # too few logs to judge
    ],
)
def test_the_monitor_stays_quiet_otherwise(tmp_path, points):
    monitor = hacking_monitor(tmp_path)
    control = feed(monitor, points)
    assert monitor.warnings == [] and monitor.hacking is None and not control.should_training_stop


def test_stop_on_hacking_stops_the_run_and_a_monitor_without_gold_never_checks(tmp_path):
    control = feed(hacking_monitor(tmp_path, stop_on_hacking=True), [(0.1, 0.5), (0.3, 0.4), (0.5, 0.3), (0.7, 0.2)])
    assert control.should_training_stop
    # every process decides, from the same gathered means, so that all stop at the same step; only the main one
    # writes metrics.jsonl and warns
    other = hacking_monitor(tmp_path / "other", stop_on_hacking=True)
    assert feed(other, [(0.1, 0.5), (0.3, 0.4), (0.5, 0.3), (0.7, 0.2)], main=False).should_training_stop
    assert other.hacking["seen_at"] == 4 and other.warnings == [] and not (tmp_path / "other").exists()
    plain = RLVRMonitor(tmp_path / "plain", patience=3)
    feed(plain, [(0.1, 0.5), (0.3, 0.4), (0.5, 0.3), (0.7, 0.2)])
    assert plain.warnings == []


def test_stop_on_reward_hacking_without_gold_rewards_is_a_config_error():
    with pytest.raises(ValueError, match="stop_on_reward_hacking needs gold_rewards"):
        parse("--stop_on_reward_hacking", "true")


# ---------------------------------------------------------------- real tiny runs


@pytest.mark.kernel_dependent
def test_gold_rewards_are_logged_and_leave_training_unchanged(tmp_path):
    """The same 2 steps with and without gold rewards: the same weights, bit for bit; gold/* and proxy/* logged."""
    weights = {}
    for name, extra in (("plain", []), ("gold", ["--gold_rewards", '["math_accuracy", {"name": "format_only"}]'])):
        out = tmp_path / name
        grpo.main(*parse(*RUN, "--max_steps", "2", "--save_strategy", "no", "--output_dir", str(out), *extra))
        weights[name] = load_file(out / "model.safetensors")
    assert weights["plain"].keys() == weights["gold"].keys()
    assert all(torch.equal(weights["plain"][key], weights["gold"][key]) for key in weights["plain"])
    logged = [record for record in logs(tmp_path / "gold") if "gold/math_accuracy" in record]
    assert len(logged) == 2
    for record in logged:
        assert 0.0 <= record["gold/format_only"] <= 1.0
        # the gold math_accuracy is the training reward here, measured on the same completions
        assert record["gold/math_accuracy"] == pytest.approx(record["proxy/math_accuracy"])
        assert record["proxy/reward"] == pytest.approx(record["reward"])
    assert "gold/math_accuracy" not in logs(tmp_path / "plain")[0]


@pytest.fixture(scope="module")
def planted_reward_model(tmp_path_factory):
    return build_planted_reward_model(tmp_path_factory.mktemp("planted") / "rm", COLD_START)


@pytest.mark.kernel_dependent
def test_a_hacked_reward_model_makes_the_monitor_fire_and_the_verifier_does_not(tmp_path, planted_reward_model):
    """The planted reward model pays for fewer lines: the policy skips lookups, its reward climbs and its accuracy
    falls, and the monitor says so within its patience. The same run rewarded by the verifier itself (training
    reward = gold) raises no such warning."""
    hacked = tmp_path / "hacked"
    rewards = json.dumps([{"name": "reward_model", "path": str(planted_reward_model)}])
    grpo.main(
        *parse(*RUN, "--max_steps", "10", "--save_strategy", "no", "--output_dir", str(hacked),
               "--rewards", rewards, "--gold_rewards", '["math_accuracy"]')
    )  # fmt: skip
    fired = card(hacked)["reward_hacking"]
    assert fired is not None, logs(hacked)
    assert fired["seen_at"] - fired["diverged_from"] == 3  # the window of patience + 1 logs
    by_step = {record["step"]: record for record in logs(hacked) if "gold/math_accuracy" in record}
    assert by_step[fired["seen_at"]]["proxy/reward"] > by_step[fired["diverged_from"]]["proxy/reward"]
    assert by_step[fired["seen_at"]]["gold/math_accuracy"] < by_step[fired["diverged_from"]]["gold/math_accuracy"]
    assert fired["seen_at"] <= 8  # within the first 8 of 10 steps: the hack is quick and the check sees it

    honest = tmp_path / "honest"
    grpo.main(
        *parse(*RUN, "--max_steps", "10", "--save_strategy", "no", "--output_dir", str(honest),
               "--gold_rewards", '["math_accuracy"]')
    )  # fmt: skip
    assert card(honest)["reward_hacking"] is None
    assert "reward_hacking" not in {warning["kind"] for warning in card(honest)["monitor_warnings"]}


@pytest.mark.kernel_dependent
def test_stop_on_reward_hacking_saves_the_checkpoint_from_before_the_divergence(tmp_path, planted_reward_model):
    out = tmp_path / "stopped"
    rewards = json.dumps([{"name": "reward_model", "path": str(planted_reward_model)}])
    grpo.main(
        *parse(*RUN, "--max_steps", "12", "--save_strategy", "steps", "--save_steps", "1", "--save_total_limit", "20",
               "--output_dir", str(out),
               "--rewards", rewards, "--gold_rewards", '["math_accuracy"]', "--stop_on_reward_hacking", "true")
    )  # fmt: skip
    fired = card(out)["reward_hacking"]
    assert fired is not None and card(out)["final_step"] == fired["seen_at"] < 12  # stopped where it fired
    restored = fired["restored_checkpoint"]
    assert restored.endswith(f"checkpoint-{fired['diverged_from']}")
    saved, before = load_file(out / "model.safetensors"), load_file(grpo.Path(restored) / "model.safetensors")
    stop = load_file(out / f"checkpoint-{fired['seen_at']}" / "model.safetensors")
    assert all(torch.equal(saved[key], before[key]) for key in before)
    assert any(not torch.equal(saved[key], stop[key]) for key in before)
