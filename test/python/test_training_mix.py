"""training/train.py's sample-kind shares (mix_shares): --rollout-share and its errors; which share a
sample draws from (mix_key) and what select() takes from each.

    PYTHONPATH=learner:training /usr/bin/python3 -m unittest discover -s test/python -p 'test_*.py'
"""
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "training"))

import train  # noqa: E402


class MixShares(unittest.TestCase):
    def test_mixes_without_rollouts_are_returned_as_listed(self):
        self.assertEqual(train.mix_shares("probes-full"),
                         {"memory": 0.24, "stream": 0.14, "score": 0.06, "score_full": 0.50, "score_absent": 0.02, "copy": 0.04})

    def test_rollouts_take_their_share_and_the_rest_keep_probes_full_proportions(self):
        # probes-full's shares times 0.92, by hand
        want = {"memory": 0.2208, "rollout": 0.08, "stream": 0.1288, "score": 0.0552, "score_full": 0.46,
                "score_absent": 0.0184, "copy": 0.0368}
        got = train.mix_shares("probes-full-rollouts")
        self.assertEqual(set(got), set(want))
        for k in want:
            self.assertAlmostEqual(got[k], want[k], places=9, msg=k)

    def test_rollout_share_flag(self):
        got = train.mix_shares("probes-full-rollouts", 0.25)
        self.assertAlmostEqual(got["rollout"], 0.25)
        self.assertAlmostEqual(got["score_full"], 0.375)  # 0.5 * 0.75
        self.assertAlmostEqual(sum(got.values()), 1.0, places=9)

    def test_bad_rollout_shares_are_refused_by_name(self):
        for bad in (0, 1, -0.1, 1.5):
            with self.assertRaisesRegex(SystemExit, r"--rollout-share .*must be in \(0, 1\)"):
                train.mix_shares("probes-full-rollouts", bad)
        with self.assertRaisesRegex(SystemExit, r"--rollout-share needs a mix with a `rollout` share.*probes-full"):
            train.mix_shares("probes-full", 0.1)


class MixKeys(unittest.TestCase):
    BUNDLES = {"memory": 0.2, "memory_bundle": 0.5, "memory_page": 0.3}

    def test_a_mix_that_splits_a_kind_sends_pages_and_bundles_to_their_own_shares(self):
        self.assertEqual(train.mix_key({"p": "memory", "k": 1}, self.BUNDLES), "memory")
        self.assertEqual(train.mix_key({"p": "memory", "k": 2}, self.BUNDLES), "memory_bundle")
        self.assertEqual(train.mix_key({"p": "memory", "k": 10}, self.BUNDLES), "memory_bundle")
        self.assertEqual(train.mix_key({"p": "memory", "k": 1, "pg": 1}, self.BUNDLES), "memory_page")
        self.assertEqual(train.mix_key({"p": "memory"}, self.BUNDLES), "memory")  # no k: one objective

    def test_a_kind_the_mix_does_not_split_keeps_its_name(self):
        self.assertEqual(train.mix_key({"p": "stream", "k": 4, "pg": 1}, self.BUNDLES), "stream")
        self.assertEqual(train.mix_key({"p": "memory", "k": 4, "pg": 1}, train.MIXES["scratch"]), "memory")

    def test_select_fills_each_share_from_its_own_samples(self):
        import random
        # 10-token samples: 30 chains, 30 bundles, 30 page rounds; a budget of 200 tokens
        samples = ([{"p": "memory", "k": 1, "c": [0] * 5, "o": [0] * 5} for _ in range(30)]
                   + [{"p": "memory", "k": 4, "c": [0] * 5, "o": [0] * 5} for _ in range(30)]
                   + [{"p": "memory", "k": 1, "pg": 1, "c": [0] * 5, "o": [0] * 5} for _ in range(30)])
        got = train.select(samples, 200, random.Random(0), self.BUNDLES)
        by = {}
        for s in got:
            key = train.mix_key(s, self.BUNDLES)
            by[key] = by.get(key, 0) + 1
        self.assertEqual(by, {"memory": 4, "memory_bundle": 10, "memory_page": 6})  # 40, 100, 60 tokens


if __name__ == "__main__":
    unittest.main()
