"""Sample from a model, verify, keep the correct completions: the data step of rejection sampling and distillation.

Both recipes turn a model's own completions into SFT data by one rule, written once here:

1. sample `n` completions per problem with eval's sampler (`eval.runner.sample_and_score`), so each
   completion is scored by its row's own verifier, the same one that reports pass@k;
2. keep a completion when the verifier says it is correct (`correct is True`; an unscorable row keeps
   nothing) and, by default, when it ended with EOS: a truncated completion teaches the model not to stop;
3. drop duplicates within a problem: completions equal after normalisation (case, spacing, LaTeX
   dressing, as data_filters.dedup compares questions) are one completion, the first one kept; sampled with
   tools (`tools:`, eval/tools/trl_sampling.py), a completion is its whole conversation, calls and results
   included, and is kept as such in the row's `messages` (with the tools' schemas in `tools`) for SFT;
4. keep at most `m` per problem, chosen `shortest` first (fewest tokens, then fewest characters, then
   sampling order), at `random` (a generator seeded by the run seed and the problem id, so a rerun
   keeps the same ones whatever the other problems) or `best` (the highest reward-model score first).

With `keep_reward_model` (a `reward_model` reward's options: rewards.learned.reward_models), every sample is also scored by
that learned reward, and `keep_by` says what keeps it: the `verifier` (step 2, the default), the
`reward_model` alone (a score of at least `keep_min_score`: the rule for tasks no verifier can check), or
`both`. Best-of-n by a reward model is `selection: best` with `max_per_problem: 1`.

STaR's rationalisation (Zelikman et al. 2022) reuses the same rule: problems the model did not solve are
sampled again with the gold answer given as a hint (`add_answer_hint`), and the verified rationales are
stored with the ORIGINAL prompt, so the model learns to reach the answer without being told it.
"""

from recipes.common.traces.collect import collect_traces, make_trace_sampler, sft_tokenizer, solved_ids
from recipes.common.traces.hints import DEFAULT_HINT, add_answer_hint, mentions_hint
from recipes.common.traces.keep import SELECTIONS, completion_key, select_samples
from recipes.common.traces.options import KEEP_BY, TraceArguments
from recipes.common.traces.reward_scores import score_with_reward_model

__all__ = [
    "DEFAULT_HINT", "KEEP_BY", "SELECTIONS", "TraceArguments", "add_answer_hint", "collect_traces",
    "completion_key", "make_trace_sampler",
    "mentions_hint", "score_with_reward_model", "select_samples", "sft_tokenizer", "solved_ids",
]  # fmt: skip
