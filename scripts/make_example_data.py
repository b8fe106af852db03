"""Write my_train.jsonl and my_test.jsonl: own-data files for the README's "Your own data, end to end" block.

    python scripts/make_example_data.py [--train 200] [--test 50] [--seed 57] [--out .]

Two-step word problems ("Ana has 23 stamps, gets 15 more and gives away 9. How many stamps does Ana have
now?") in the README's own column names (`question`, `final_answer`, `worked_solution`), the worked solution
one line a step and a boxed answer; every question distinct, the held-out ones disjoint from the training ones.
The README's costs and figures were measured on these (seed 57). Why a script: the figures can be rerun, and a
new user has files to try the block on before writing their own.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

NAMES = ("Ana", "Ben", "Chen", "Dana", "Eli", "Fatima", "Goran", "Hana")
THINGS = ("apples", "stamps", "marbles", "books", "coins", "shells")


def problem(rng: random.Random) -> dict:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    start, more = rng.randint(10, 60), rng.randint(5, 40)
    given = rng.randint(1, start + more - 1)
    left = start + more - given
    return {
        "question": f"{name} has {start} {thing}, gets {more} more and gives away {given}. "
        f"How many {thing} does {name} have now?",
        "final_answer": str(left),
        "worked_solution": f"{start} + {more} = {start + more}. {start + more} - {given} = {left}.\n\\boxed{{{left}}}",
    }


def distinct_problems(count: int, seed: int) -> list[dict]:
    rng, seen, rows = random.Random(seed), set(), []
    while len(rows) < count:
        row = problem(rng)
        if row["question"] not in seen:
            seen.add(row["question"])
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", type=int, default=200, help="training problems")
    parser.add_argument("--test", type=int, default=50, help="held-out problems")
    parser.add_argument("--seed", type=int, default=57)
    parser.add_argument("--out", type=Path, default=Path("."), help="the folder the two files go to")
    args = parser.parse_args(argv)
    rows = distinct_problems(args.train + args.test, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, part in (("my_train.jsonl", rows[: args.train]), ("my_test.jsonl", rows[args.train :])):
        (args.out / name).write_text("".join(json.dumps(row) + "\n" for row in part))
        print(f"{args.out / name}: {len(part)} problems")


if __name__ == "__main__":
    main()
