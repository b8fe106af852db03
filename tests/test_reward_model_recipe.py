"""recipes/reward_model.py: the preference pairs, the threshold and agreement metrics, and the recipe end to end.

The pairs and the metrics are checked on hand-made samples and toy scores whose answers are worked out by
hand. End to end, the policy is tests/support/guessing_model.py, which answers \\boxed{7} or \\boxed{3} about
half the time each: on problems whose gold answer is 7 nearly every problem has both a correct and a wrong
sample, so there are pairs, and an ORM that has learned anything ranks "7" above "3" on held-out problems.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from basics.atomic_files import read_jsonl, write_jsonl
from recipes import reward_model
from recipes.common.command_line import config
from recipes.stages.reward_model import training as orm_training
from recipes.stages.reward_model.pairs import (
    agreement_metrics,
    build_pairs,
    choose_threshold,
    labelled,
    pairs_of,
    pairwise_accuracy,
    roc_auc,
)
from recipes.stages.reward_model.training import reuse_or_build, samples_fingerprint
from tests.support.guessing_model import rows_with_gold

ROW = {"id": "p1", "prompt": [{"role": "user", "content": "What is 3 + 4?"}], "difficulty": 2}


def sample(text: str, correct: bool | None, finish: str = "stop") -> dict:
    return {"text": text, "correct": correct, "finish_reason": finish, "num_tokens": len(text)}


class Result:  # eval.runner.ProblemResult as pairs_of reads it
    def __init__(self, samples):
        self.samples = samples


# ---------------------------------------------------------------- pairs


def test_a_pair_is_a_correct_and_a_wrong_completion_of_the_same_prompt():
    samples = [sample("\\boxed{7}", True), sample("\\boxed{3}", False), sample("it is \\boxed{7}", True)]
    pairs = build_pairs(ROW, samples, max_pairs=10, seed=0)
    assert len(pairs) == 2  # two correct x one wrong
    assert all(p["id"] == "p1" and p["prompt"] == ROW["prompt"] and p["difficulty"] == 2 for p in pairs)
    assert {p["chosen"] for p in pairs} == {"\\boxed{7}", "it is \\boxed{7}"}
    assert {p["rejected"] for p in pairs} == {"\\boxed{3}"}

    other = {"id": "p2", "prompt": [{"role": "user", "content": "What is 1 + 2?"}]}
    rows, results = [ROW, other], [Result(samples), Result([sample("\\boxed{3}", True), sample("\\boxed{9}", False)])]
    pairs, stats = pairs_of(rows, results, max_pairs=10, seed=0)
    by_id = {row["id"]: row for row in rows}
    assert all(p["prompt"] == by_id[p["id"]]["prompt"] for p in pairs)  # never a prompt of another problem
    assert [p["chosen"] for p in pairs if p["id"] == "p2"] == ["\\boxed{3}"]  # correct for p2, though wrong for p1
    assert stats["pairs"] == 3 and stats["with_pairs"] == 2


def test_problems_with_one_kind_of_sample_give_no_pair():
    only_correct = [sample("\\boxed{7}", True), sample("so \\boxed{7}", True)]
    only_wrong = [sample("\\boxed{3}", False), sample("\\boxed{5}", False)]
    unscorable = [sample("\\boxed{7}", None), sample("\\boxed{3}", False)]  # None is not "correct"
    assert build_pairs(ROW, only_correct, 4) == build_pairs(ROW, only_wrong, 4) == build_pairs(ROW, unscorable, 4) == []
    rows = [{**ROW, "id": name} for name in ("a", "b", "c", "d")]
    both = [sample("\\boxed{7}", True), sample("\\boxed{3}", False)]
    results = [Result(only_correct), Result(only_wrong), Result(unscorable), Result(both)]
    pairs, stats = pairs_of(rows, results, max_pairs=4, seed=0)
    assert [p["id"] for p in pairs] == ["d"]
    assert (stats["only_correct"], stats["only_wrong"], stats["with_pairs"], stats["problems"]) == (1, 2, 1, 4)
    assert stats["samples"] == 8 and stats["correct"] == 3


def test_truncated_completions_are_neither_chosen_nor_rejected_unless_asked():
    samples = [
        sample("\\boxed{7}", True),
        sample("\\boxed{7} and then some more", True, "length"),  # its box is right, but it never ended
        sample("\\boxed{3}", False),
        sample("let me think and think", False, "length"),  # wrong because it was cut
    ]
    pairs = build_pairs(ROW, samples, max_pairs=10, seed=0)
    assert [(p["chosen"], p["rejected"]) for p in pairs] == [("\\boxed{7}", "\\boxed{3}")]
    assert len(build_pairs(ROW, samples, max_pairs=10, seed=0, require_stop=False)) == 4
    only_cut_wrong = [sample("\\boxed{7}", True), sample("let me think", False, "length")]
    assert build_pairs(ROW, only_cut_wrong, max_pairs=10) == []  # the wrong side is empty once the cut one goes


def test_duplicates_count_once_and_the_cap_spreads_the_pairs():
    correct = [sample(f"\\boxed{{7}} way {k}", True) for k in range(3)]
    wrong = [sample(f"\\boxed{{{k}}}", False) for k in (1, 2, 3)]
    duplicates = [sample("\\boxed{7}  WAY 0", True), sample("\\boxed{ 1 }", False)]  # normalised: seen already
    assert labelled(correct + wrong + duplicates) == (correct, wrong)
    pairs = build_pairs(ROW, correct + wrong + duplicates, max_pairs=3, seed=0)
    # a cap of 3 over 3 x 3 completions: each completion in exactly one pair
    assert sorted(p["chosen"] for p in pairs) == sorted(s["text"] for s in correct)
    assert sorted(p["rejected"] for p in pairs) == sorted(s["text"] for s in wrong)
    pairs = build_pairs(ROW, correct + wrong, max_pairs=4, seed=0)
    assert len(pairs) == 4 and len({(p["chosen"], p["rejected"]) for p in pairs}) == 4
    assert len(build_pairs(ROW, correct + wrong, max_pairs=100, seed=0)) == 9  # all of them, none twice


def test_the_draw_is_seeded_by_the_seed_and_the_problem_alone():
    samples = [sample(f"\\boxed{{7}} way {k}", True) for k in range(4)] + [
        sample(f"\\boxed{{{k}}}", False) for k in range(1, 5)
    ]
    draw = [build_pairs(ROW, samples, max_pairs=2, seed=seed) for seed in range(8)]
    assert draw[3] == build_pairs(ROW, samples, max_pairs=2, seed=3)  # reproducible
    assert len({json.dumps(pairs) for pairs in draw}) > 1  # and the seed matters
    other = {"id": "p0", "prompt": ROW["prompt"]}
    alone, _ = pairs_of([ROW], [Result(samples)], max_pairs=2, seed=3)
    among, _ = pairs_of([other, ROW], [Result(samples), Result(samples)], max_pairs=2, seed=3)
    assert [p for p in among if p["id"] == "p1"] == alone  # other problems change nothing


# ---------------------------------------------------------------- metrics


def test_pairwise_accuracy_counts_a_tie_as_a_miss():
    assert pairwise_accuracy([1.0, 2.0, 3.0], [0.0, 2.0, 4.0]) == pytest.approx(1 / 3)
    assert pairwise_accuracy([], []) is None


def test_threshold_rules_by_hand():
    positive, negative = [1.0, 4.0], [0.0, 2.0]
    # cuts and accuracy (verdict: score > cut): -1 -> 2/4, 0.5 -> 3/4, 1.5 -> 2/4, 3 -> 3/4, 4 -> 2/4: the lowest best
    assert choose_threshold(positive, negative, "accuracy") == 0.5
    assert choose_threshold(positive, negative, "midpoint") == pytest.approx((2.5 + 1.0) / 2)
    assert choose_threshold([3.0, 5.0], [1.0, 2.0], "accuracy") == 2.5  # separable: midway across the gap
    assert choose_threshold([1.0], [1.0], "accuracy") == 0.0  # a tie: no cut beats "all correct"
    with pytest.raises(ValueError, match="both"):
        choose_threshold([1.0], [], "accuracy")


def test_auc_and_agreement_by_hand():
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == pytest.approx(0.75)
    assert roc_auc([1.0, 1.0], [True, False]) == pytest.approx(0.5)  # a tie counts half
    assert roc_auc([1.0, 2.0], [True, True]) is None
    metrics = agreement_metrics([0.9, 0.2, 0.6, 0.1], [True, False, False, False], threshold=0.5)
    assert metrics["samples"] == 4
    assert metrics["agreement"] == pytest.approx(3 / 4)  # verdicts T F T F against T F F F
    assert metrics["auc"] == pytest.approx(1.0)  # the one correct sample scores above every wrong one
    assert metrics["base_rate"] == pytest.approx(1 / 4) and metrics["majority_agreement"] == pytest.approx(3 / 4)
    assert metrics["agreement_on_correct"] == 1.0 and metrics["agreement_on_wrong"] == pytest.approx(2 / 3)
    assert metrics["orm_positive_rate"] == 0.5


# ---------------------------------------------------------------- files


def test_sampled_files_are_reused_only_for_the_same_inputs(tmp_path):
    calls = []

    def build():
        calls.append(1)
        return [{"id": "a"}], {"pairs": 1}

    path = tmp_path / "pairs.jsonl"
    assert reuse_or_build(path, {"seed": 0}, build) == ([{"id": "a"}], {"pairs": 1}, False)
    assert reuse_or_build(path, {"seed": 0}, build) == ([{"id": "a"}], {"pairs": 1}, True)
    assert reuse_or_build(path, {"seed": 1}, build)[2] is False and len(calls) == 2
    assert json.loads((tmp_path / "pairs.fingerprint.json").read_text())["fingerprint"] == {"seed": 1}

    args = reward_model.make_parser().parse_args(["--output_dir", str(tmp_path)])[0]
    train = samples_fingerprint(args, "artifacts/demo/sft", 0, "train")
    assert train != samples_fingerprint(replace(args, max_pairs_per_problem=1), "artifacts/demo/sft", 0, "train")
    assert train != samples_fingerprint(
        replace(args, sampling=replace(args.sampling, temperature=0.5)), "artifacts/demo/sft", 0, "train"
    )
    assert train != samples_fingerprint(args, "artifacts/demo/sft", 1, "train")
    agreement = samples_fingerprint(args, "artifacts/demo/sft", 0, "agreement")
    assert agreement == samples_fingerprint(
        replace(args, max_pairs_per_problem=1), "artifacts/demo/sft", 0, "agreement"
    )


# ---------------------------------------------------------------- the recipe


@pytest.fixture(scope="module")
def sevens(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sevens")
    write_jsonl(folder / "train.jsonl", rows_with_gold("7", "train", 400))
    write_jsonl(folder / "eval.jsonl", rows_with_gold("7", "eval", 600))
    return folder / "train.jsonl", folder / "eval.jsonl"


def small_run(model, train, held_out, out, *extra: str) -> list[str]:
    return [
        "--model_name_or_path", str(model), "--output_dir", str(out), "--dataset_name", str(train),
        "--eval_dataset_name", str(held_out), "--sampling", "{n: 4, max_new_tokens: 16}", "--max_pairs_per_problem", "2",
        "--agreement_samples_per_problem", "4", "--max_steps", "2",
        "--per_device_train_batch_size", "8", "--warmup_steps", "0", "--learning_rate", "1e-3",
        "--logging_steps", "1", "--disable_tqdm", "true", "--bf16", "false", "--gradient_checkpointing", "false",
        "--save_strategy", "no", "--report_to", "none", "--max_length", "256", *extra,
    ]  # fmt: skip


def test_the_recipe_trains_a_loadable_orm_and_reports_its_metrics(guessing_model_dir, sevens, tmp_path):
    from transformers import AutoModelForSequenceClassification

    train, held_out = sevens
    out = tmp_path / "orm"
    assert reward_model.cli(small_run(guessing_model_dir, train, held_out, out, "--max_steps", "15")) == out

    model = AutoModelForSequenceClassification.from_pretrained(out)
    assert model.config.num_labels == 1
    pairs = read_jsonl(out / "pairs.jsonl")
    assert pairs and all("\\boxed{7}" in p["chosen"] and "\\boxed{7}" not in p["rejected"] for p in pairs)
    metrics = json.loads((out / "orm_metrics.json").read_text())
    assert metrics["train"]["pairs"] == len(pairs) == metrics["sampling"]["train"]["pairs"]
    assert metrics["threshold"]["rule"] == "accuracy" and isinstance(metrics["threshold"]["value"], float)
    # an ORM that learned anything ranks the policy's right answer (7) above its wrong one (3) on new problems
    assert metrics["heldout_pairs"]["pairs"] > 6 and metrics["heldout_pairs"]["pairwise_accuracy"] > 0.9
    agreement = metrics["agreement"]
    fresh = read_jsonl(out / "agreement_samples.jsonl")
    judged = [s for s in fresh if s["finish_reason"] == "stop" and s["correct"] in (True, False)]
    assert agreement["samples"] == len(judged) and agreement["excluded"] == len(fresh) - len(judged)
    assert agreement["base_rate"] == pytest.approx(sum(s["correct"] for s in judged) / len(judged))
    assert 0.2 < agreement["base_rate"] < 0.8  # the guessing model: about one answer in two is 7
    assert agreement["agreement"] > agreement["majority_agreement"] and agreement["auc"] > 0.9
    card = json.loads((out / "run_card.json").read_text())
    assert card["recipe"] == "reward_model" and card["metrics"]["heldout_pairs"] == metrics["heldout_pairs"]


def test_a_lora_orm_saved_as_an_adapter_scores_and_a_rerun_reuses_the_samples(
    guessing_model_dir, sevens, tmp_path, monkeypatch
):
    from rewards.learned.reward_models import SequenceScorer

    train, held_out = sevens
    out = tmp_path / "orm"
    argv = small_run(
        guessing_model_dir, train, held_out, out, "--use_peft", "true", "--lora_r", "4", "--lora_alpha", "8",
        "--lora_target_modules", "all-linear", "--merge_lora", "false",
    )  # fmt: skip
    reward_model.cli(argv)
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["task_type"] == "SEQ_CLS" and not (out / "config.json").exists()
    pairs = read_jsonl(out / "pairs.jsonl")
    scores = SequenceScorer([str(out)]).score_each([p["prompt"] for p in pairs], [p["chosen"] for p in pairs])
    assert len(scores) == 1 and len(scores[0]) == len(pairs)

    def no_sampling(*args, **kwargs):
        raise AssertionError("sampled again although the inputs did not change")

    monkeypatch.setattr(orm_training.PolicySamples, "results", no_sampling)
    before = (out / "pairs.jsonl").read_text()
    reward_model.cli(argv)
    assert (out / "pairs.jsonl").read_text() == before
    with pytest.raises(AssertionError, match="sampled again"):  # a changed option samples again
        reward_model.cli([*argv, "--max_pairs_per_problem", "1"])


def one_line_error(capsys, monkeypatch, argv) -> str:
    monkeypatch.setattr(config, "setup_logging", lambda: None)  # keep pytest's log handlers
    with pytest.raises(SystemExit) as exit_info:
        reward_model.cli(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    return lines[0]


def test_config_mistakes_are_one_line_and_exit_2(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(reward_model, "main", lambda *a: pytest.fail("ran although the config is wrong"))
    out = str(tmp_path / "out")
    assert "n must be >= 2" in one_line_error(capsys, monkeypatch, ["--sampling", "{n: 1}", "--output_dir", out])
    assert "threshold" in one_line_error(capsys, monkeypatch, ["--threshold", "median", "--output_dir", out])
    assert "max_pairs_per_problem" in one_line_error(capsys, monkeypatch, ["--max_pairs_per_problem", "0"])


def test_a_policy_that_never_answers_gives_no_pairs_in_one_line(tiny_model_dir, sevens, capsys, monkeypatch, tmp_path):
    train, held_out = sevens
    monkeypatch.setattr(reward_model, "train_orm", lambda *a, **k: pytest.fail("trained on nothing"))
    line = one_line_error(capsys, monkeypatch, small_run(tiny_model_dir, train, held_out, tmp_path / "orm"))
    assert "no preference pairs" in line and "only wrong" in line


def test_training_reads_the_score_at_the_token_the_scorer_reads(tiny_model_dir, smol_standin_dir, tmp_path):
    """With pad = EOS and a turn that ends with EOS, the model's own pooling (the last token that is not pad)
    reads one token early; the ORM is trained padding with another id, so it reads the last token, as the
    `reward_model` reward's scorer does."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl.trainer.reward_trainer import DataCollatorForPreference

    from recipes.stages.reward_model.training import pooling_pad_id
    from rewards.learned.reward_models import SequenceScorer

    pair = {"prompt": ROW["prompt"], "chosen": "\\boxed{7}", "rejected": "so the answer is \\boxed{3}"}
    assert pooling_pad_id(AutoTokenizer.from_pretrained(tiny_model_dir), pair) is None  # its own pad token
    assert pooling_pad_id(AutoTokenizer.from_pretrained(smol_standin_dir), pair) is None  # turns end with "\n"
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.pad_token = tokenizer.eos_token
    pad_id = pooling_pad_id(tokenizer, pair)
    assert pad_id is not None and pad_id != tokenizer.eos_token_id
    assert pooling_pad_id(tokenizer, pair, conversational=False) is not None  # plain text ends with EOS too

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_model_dir, num_labels=1).eval()
    model.config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(tmp_path / "orm")
    tokenizer.save_pretrained(tmp_path / "orm")
    scorer = SequenceScorer([str(tmp_path / "orm")])
    wanted = scorer.score_each([pair["prompt"]] * 2, [pair["chosen"], pair["rejected"]])[0]

    def trained_on(pad: int) -> list[float]:  # what the model's forward pools in training, padded with `pad`
        texts = [[*pair["prompt"], {"role": "assistant", "content": pair[key]}] for key in ("chosen", "rejected")]
        ids = [tokenizer.apply_chat_template(t, tokenize=True, return_dict=True)["input_ids"] for t in texts]
        batch = DataCollatorForPreference(pad)([{"chosen_ids": ids[0], "rejected_ids": ids[1]}])
        model.config.pad_token_id = pad
        with torch.no_grad():
            return model(**batch).logits[:, 0].tolist()

    assert trained_on(pad_id) == pytest.approx(wanted, abs=1e-5)
    assert trained_on(tokenizer.pad_token_id) != pytest.approx(wanted, abs=1e-5)  # the library's own pooling
