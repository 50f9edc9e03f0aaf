"""How `bench --isolate` grows with the number of nodes: rounds and wall time per mode.

The rounds and the verdict are ncclcheck's own (ncclcheck.bench.isolate); the pair tests are
modelled, since thousands of nodes cannot be had here. The model, per pair test: two nodes of
8 GPUs (16 ranks), a 1 GiB all-reduce, 2 warm-up iterations, a synchronising one and 5 timed
ones at the pair's busbw (healthy 40 GB/s, less up to 5% noise; a slow node 25% of that, a slow
link 30%, and a link 1,000 times below a healthy pair). Per round on top of the slowest pair:
1 s to create the subgroups' communicators, the store traffic (every rank reads the plan and
writes its time: 16 x N operations at 50,000 per second) and N/2 new_group calls per rank at
30 us each. Pairs are time-bounded as bench's are: a pair measures for at most the round's
share of the time left (--timeout) less the round's set-up, never less than three healthy
tests; the 1,000x link is measured within its budget instead of running its whole test.

    python benchmarks/isolate_scale.py                    # 64, 256, 1024, 4096 nodes
    python benchmarks/isolate_scale.py --smoke            # 16 and 32 nodes: a second or two

Links mode runs the verdict up to --links-max nodes (a tournament of 4,096 nodes holds 8.4
million pair tests); above that the row is the tournament's rounds alone, marked "plan only".
Exits non-zero when a mode names anything but the culprits it was given (nodes mode: the slow
nodes, and no link; links mode: the slow nodes and the slow link).
"""

from __future__ import annotations

import argparse
import random
import time

from ncclcheck.bench.isolate import PairTest, Round, isolate, pair, tournament_rounds

SMOKE = {"nodes": [16, 32], "links_max": 32}
RANKS_PER_PAIR = 16
NBYTES = 1 << 30
ITERATIONS = 2 + 1 + 5      # warm-up, the synchronising all-reduce, timed
HEALTHY_GBPS = 40.0
SETUP_S = 1.0               # the round's communicators
STORE_OPS_PER_S = 50_000.0
NEW_GROUP_S = 30e-6


def pair_seconds(busbw: float) -> float:
    """Wall time of one pair test at ``busbw`` (GB/s) under the model above."""
    algbw = busbw / (2.0 * (RANKS_PER_PAIR - 1) / RANKS_PER_PAIR)
    return ITERATIONS * NBYTES / (algbw * 1e9)


def round_overhead(n: int) -> float:
    return SETUP_S + 2 * (RANKS_PER_PAIR // 2) * n / STORE_OPS_PER_S + n / 2 * NEW_GROUP_S


Scenario = tuple[set[int], set[tuple[int, int]], float]  # slow nodes, slow links, link factor


def scenarios(n: int, rng: random.Random) -> dict[str, Scenario]:
    several = set(rng.sample(range(n), max(4, n // 100)))
    a, b = rng.sample(range(n), 2)
    c, d = rng.sample(range(n), 2)
    return {"one slow node": ({rng.randrange(n)}, set(), 0.3),
            "several slow": (several, set(), 0.3),
            "one slow link": (set(), {pair(a, b)}, 0.3),
            "link 1000x": (set(), {pair(c, d)}, 0.001)}


def run(mode: str, n: int, scenario: Scenario, seed: int,
        timeout: float) -> tuple[int, int, float, float, bool]:
    """Rounds, pair tests, modelled wall seconds, seconds spent planning and judging, and
    whether exactly the culprits were named."""
    slow, links, link_factor = scenario
    rng = random.Random(seed)
    wall = 0.0

    def measure(index: int, rnd: Round, share: float) -> tuple[list[PairTest], float]:
        nonlocal wall
        budget = max(share - round_overhead(n), 3 * pair_seconds(HEALTHY_GBPS))
        tests = []
        for a, b in rnd.pairs:
            factor = (0.25 if a in slow or b in slow else link_factor if pair(a, b) in links
                      else 1.0)
            busbw = HEALTHY_GBPS * factor * (1 - rng.uniform(0, 0.05))
            tests.append(PairTest(a, b, busbw, index, rnd.reference,
                                  min(pair_seconds(busbw), budget)))
        seconds = round_overhead(n) + max(t.time_s for t in tests)
        wall += seconds
        return tests, seconds

    started = time.process_time()
    iso = isolate(mode, n, measure, time_left=lambda: timeout - wall)
    cpu = time.process_time() - started
    verdict = iso.verdict
    # nodes mode names nodes only; a slow link is links mode's to name
    named = set(verdict.slow_nodes) == slow and set(verdict.slow_links) == (
        links if mode == "links" else set())
    return len(iso.rounds), len(iso.tests), wall, cpu, named and not verdict.suspects


def plan_only(n: int) -> tuple[int, float]:
    """Links mode above --links-max: the tournament's rounds and their modelled wall time
    (every pair healthy but one round's slowest at the slow-link rate)."""
    rounds = len(tournament_rounds(n))
    wall = rounds * (round_overhead(n) + pair_seconds(HEALTHY_GBPS))
    return rounds, wall + pair_seconds(0.3 * HEALTHY_GBPS) - pair_seconds(HEALTHY_GBPS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[64, 256, 1024, 4096])
    parser.add_argument("--links-max", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--timeout", type=float, default=1e6,
                        help="the isolate rounds' share of bench --timeout, seconds")
    parser.add_argument("--smoke", action="store_true", help="16 and 32 nodes (seconds)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    print(f"{'mode':>5} {'nodes':>6} {'scenario':>14} {'rounds':>7} {'pairs':>9} "
          f"{'wall s':>9} {'plan cpu s':>10} {'named':>9}")
    faults = 0
    for mode in ("nodes", "links"):
        for n in args.nodes:
            rng = random.Random(args.seed + n)
            for name, scenario in scenarios(n, rng).items():
                if mode == "links" and n > args.links_max:
                    rounds, wall = plan_only(n)
                    print(f"{mode:>5} {n:>6} {name:>14} {rounds:>7} {n * (n - 1) // 2:>9} "
                          f"{wall:>9.0f} {'-':>10} {'plan only':>9}")
                    continue
                rounds, tests, wall, cpu, right = run(mode, n, scenario, args.seed, args.timeout)
                faults += not right
                print(f"{mode:>5} {n:>6} {name:>14} {rounds:>7} {tests:>9} {wall:>9.1f} "
                      f"{cpu:>10.2f} {'right' if right else 'WRONG':>9}")
    return 1 if faults else 0


if __name__ == "__main__":
    raise SystemExit(main())
