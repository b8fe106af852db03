"""scripts/demo_real.py end to end on the stand-in (SmolLM2's real tokenizer and template, random weights), --fast:
the stages run as subprocesses with the smollm2-135m configs, every stage is evaluated, and the report has its
table, curves and protocol. `make demo-real` runs the same code on the real weights with the full budgets."""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))

import demo_real  # noqa: E402


def test_fast_demo_real_runs_every_stage_and_writes_the_report(smol_standin_dir, tmp_path, monkeypatch):
    out = tmp_path / "demo-real"
    results = demo_real.main(["--fast", "--model", str(smol_standin_dir), "--output-dir", str(out)])
    assert set(results["table"]) == {"base", "sft", "dapo", "gain"}
    assert isinstance(results["dapo_cleared_sft"], bool)
    gain = results["table"]["gain"]  # paired on the same problems: DAPO's pass@1 minus the cold start's
    assert gain["mean"] == pytest.approx(
        results["table"]["dapo"]["pass@1"]["mean"] - results["table"]["sft"]["pass@1"]["mean"]
    )
    assert gain["ci95"][0] <= gain["mean"] <= gain["ci95"][1] and gain["problems"] > 0
    report = (out / "report.md").read_text()
    for name in demo_real.STAGES.values():
        assert name in report
    assert "paired on the same" in report
    assert "pass@1, level 1" in report and '"n": 2' in report  # the per-level columns and the protocol
    assert (out / "dapo_curves.png").stat().st_size > 1000
    card = json.loads((out / "sft" / "run_card.json").read_text())
    assert card["config"]["training"]["assistant_only_loss"] is False  # SmolLM2's template: prompt/completion loss
    assert (out / "sft" / "config.json").is_file()  # the LoRA adapter was merged: a plain model for DAPO

    # a rerun skips what is done, and keeps the wall time of the run that did it
    timings = json.loads((out / "timings.json").read_text())
    assert timings["this run"] > 0 and {"sft", "dapo"} <= set(timings)
    again = demo_real.main(["--fast", "--model", str(smol_standin_dir), "--output-dir", str(out)])
    assert again == results
    assert json.loads((out / "timings.json").read_text()) == timings

    # a second seed beside the first: only its DAPO run and evaluation are new; the report pools the two. They run in
    # this process (--in-process; the subprocesses are checked above), the recipes keeping pytest's log handlers
    monkeypatch.setattr("recipes.common.command_line.config.setup_logging", lambda *a, **k: None)
    argv = ["--fast", "--in-process", "--model", str(smol_standin_dir), "--output-dir", str(out), "--seeds", "0", "1"]
    seeds = demo_real.main(argv)
    timings = json.loads((out / "timings.json").read_text())
    assert {"dapo_s1", "eval_dapo_s1"} <= set(timings) and (out / "dapo_s1" / "run_card.json").is_file()
    card = json.loads((out / "dapo_s1" / "run_card.json").read_text())
    assert card["config"]["training"]["seed"] == 1
    table = seeds["table"]
    gains = [table[stage]["gain"]["mean"] for stage in ("dapo", "dapo_s1")]
    assert table["seed_gains"]["values"] == gains
    # every run shares the cold start's problems, so the pooled mean is the mean of the seeds' means
    assert table["pooled_gain"]["mean"] == pytest.approx(sum(gains) / 2)
    assert table["pooled_gain"]["ci95"][0] <= table["pooled_gain"]["mean"] <= table["pooled_gain"]["ci95"][1]
    assert table["dapo"]["pass@1"] == results["table"]["dapo"]["pass@1"]  # seed 0's run was reused, not redone
    report = (out / "report.md").read_text()
    assert "DAPO from the cold start, seed 1" in report and "Pooled" in report


def test_dapo_as_two_processes_splits_the_batch_and_refuses_an_uneven_split(tmp_path, monkeypatch):
    """--processes 2 launches DAPO through accelerate with the config's per-device batch halved: a step sees the
    same 8 prompts x 4 samples as one process would. A batch that does not split stops before anything runs."""
    commands = []
    monkeypatch.setattr(demo_real.subprocess, "Popen", lambda command, **kwargs: commands.append(command))
    config = demo_real.CONFIGS / "dapo_lora.yaml"
    per_device = demo_real.yaml.safe_load(config.read_text())["per_device_train_batch_size"]
    args = ("grpo.py", config, tmp_path / "sft", tmp_path / "dapo", [], tmp_path / "dapo.log")
    demo_real.recipe(*args, processes=2)
    command = commands[-1]
    assert command[1:3] == ["-m", "accelerate.commands.launch"]
    assert command[command.index("--num_processes") + 1] == "2"
    assert "multi_cpu.yaml" in command[command.index("--config_file") + 1]
    assert command[command.index("--per_device_train_batch_size") + 1] == str(per_device // 2)

    demo_real.recipe(*args, processes=1)  # one process: the config as it is, no launcher
    assert commands[-1][1].endswith("grpo.py") and "--per_device_train_batch_size" not in commands[-1]

    with pytest.raises(SystemExit, match="does not split"):
        demo_real.recipe(*args, processes=per_device + 1)
    assert len(commands) == 2


def test_the_pooled_gain_by_hand():
    cold = {"a": 0.5, "b": 0.5, "c": 0.25}
    runs = [{"a": 1.0, "b": 0.5, "c": 1.0}, {"a": 0.5, "b": 0.0}]  # c is not in every run: left out
    # per problem, the mean over runs minus the cold start: a (1.0 + 0.5)/2 - 0.5 = +0.25, b 0.25 - 0.5 = -0.25
    mean, (low, high), problems = demo_real.pooled_gain(cold, runs)
    assert problems == 2 and mean == pytest.approx(0.0) and low == pytest.approx(-0.25) and high == pytest.approx(0.25)


def test_the_pooled_gain_command_reads_evaluation_folders(tmp_path, capsys):
    import pooled_gain

    def run(name, values):
        folder = tmp_path / name / "d"
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text("{}")
        lines = [json.dumps({"id": pid, "pass@1": value}) for pid, value in values.items()]
        (folder / "per_problem.jsonl").write_text("\n".join(lines) + "\n")
        return tmp_path / name

    base = run("cold", {"a": 0.0, "b": 1.0, "c": 0.5})
    one = run("s0", {"a": 1.0, "b": 1.0, "c": 0.5})  # +1/3
    two = run("s1", {"a": 0.0, "b": 0.0, "c": 1.0})  # (0 - 1 + 0.5) / 3 = -1/6
    assert pooled_gain.main([str(base), str(one), str(two)]) == 0
    out = capsys.readouterr().out
    # pooled, per problem: a (1 + 0)/2 - 0 = 0.5, b 0.5 - 1 = -0.5, c 0.75 - 0.5 = 0.25; mean 0.25 / 3
    assert "baseline" in out and ": 0.500" in out
    assert "paired +0.333" in out and "paired -0.167" in out and "pooled over 2 runs: +0.083" in out
    with pytest.raises(SystemExit, match="pass@4"):
        pooled_gain.main([str(base), str(one), "--metric", "pass@4"])


@pytest.mark.parametrize(
    "precision, sampling, loss",
    [("config", None, None), ("fp32", "float32", "float32"), ("bf16-sampling", "bfloat16", "float32")],
)
def test_dapo_runs_in_the_configs_precision_unless_told_otherwise(tmp_path, monkeypatch, precision, sampling, loss):
    """--precision fp32 reproduces the earlier figures' protocol (sampling and the loss pass in fp32), bf16-sampling
    keeps bf16 for sampling only; by default DAPO takes the config's own (bf16 where this CPU is faster)."""
    extras = []
    monkeypatch.setattr(
        demo_real, "recipe", lambda script, config, model, output, extra, *rest, **kw: extras.append(extra)
    )
    monkeypatch.setattr(demo_real, "run_jobs", lambda jobs, cores, done: [job.start() for job in jobs] and {})
    monkeypatch.setattr(demo_real, "evaluation", lambda *args: None)
    args = demo_real.parse_args(["--output-dir", str(tmp_path), "--model", str(tmp_path), "--precision", precision])
    demo_real.run(args)
    dapo = [extra for extra in extras if "--seed" in extra]
    assert dapo

    def flag(extra, name):  # the value a flag is given, None where it is not given (the config's auto)
        return extra[extra.index(name) + 1] if name in extra else None

    assert all(flag(extra, "--sampling_dtype") == sampling and flag(extra, "--loss_dtype") == loss for extra in dapo)


def test_a_stage_run_in_process_ends_as_its_subprocess_would(tmp_path, monkeypatch, capsys):
    """--in-process: a stage is its recipe's cli called here with the subprocess's arguments and sys.argv (the run
    card's command); a mistake in its flags is its exit status, and the demo stops on it as on a failed subprocess.
    DAPO then trains as one process."""
    monkeypatch.setattr("recipes.common.command_line.config.setup_logging", lambda *a, **k: None)
    before, log = list(sys.argv), tmp_path / "sft.log"
    config = demo_real.CONFIGS / "sft.yaml"
    ran = demo_real.recipe(
        "sft.py", config, tmp_path, tmp_path / "sft", ["--no_such_option", "1"], log, in_process=True
    )
    assert ran.poll() == ran.wait() == 2 and sys.argv == before
    assert "no_such_option" in capsys.readouterr().err  # the recipe's own one-line mistake
    with pytest.raises(SystemExit, match=r"sft failed \(exit 2\)"):
        demo_real.wait(ran, "sft", log)
    assert demo_real.parse_args(["--in-process"]).processes == 1
    with pytest.raises(SystemExit):
        demo_real.parse_args(["--in-process", "--processes", "2"])


def test_plan_minutes_schedules_as_run_jobs_does_by_hand():
    # A 10 then B 20 (after A); C 5 then D 30 (after C); E 1, after a job that has ended already (not in the plan).
    plan = [("A", 10, []), ("B", 20, ["A"]), ("C", 5, []), ("D", 30, ["C"]), ("E", 1, ["ended"])]
    # 2 cores: A and C start at 0; at 5 C ends and D starts (B still waits for A); at 10 A ends and B starts; at 30
    # B ends and E starts (ends 31); D ends at 35.
    two = demo_real.plan_minutes(plan, 2)
    assert two == {"wall": 35, "chain": ["C", "D"], "chain_minutes": 35}
    # 1 core, in list order: A 0-10, B 10-30, C 30-35, D 35-65, E 65-66: the sum.
    assert demo_real.plan_minutes(plan, 1)["wall"] == 66
    # enough cores: the longest chain, C -> D.
    assert demo_real.plan_minutes(plan, 8)["wall"] == 35
    # a job listed before the one it waits for still starts after it ends: B 0-20 (after A), A 20-30 on 1 core
    assert demo_real.plan_minutes([("B", 10, ["A"]), ("A", 20, [])], 1) == {
        "wall": 30, "chain": ["A", "B"], "chain_minutes": 30
    }  # fmt: skip
    with pytest.raises(ValueError, match="wait for one another"):
        demo_real.plan_minutes([("A", 1, ["B"]), ("B", 1, ["A"])], 2)
