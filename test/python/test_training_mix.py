"""training/train.py's sample-kind shares (mix_shares): --rollout-share and its errors; which share a
sample draws from (mix_key) and what select() takes from each; the URL drill (url_samples) and the
tokenizer it spells URLs with (bpe_ids).

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

    def test_the_page_stage_2_is_probes_full_with_its_agent_rounds_split_as_in_its_stage_1(self):
        s2, s1, pf = train.MIXES["probes-full-bundles"], train.MIXES["bundles-pages-url"], train.MIXES["probes-full"]
        self.assertAlmostEqual(sum(s2.values()), 1.0, places=9)
        for k in ("score", "score_full", "score_absent"):
            self.assertEqual(s2[k], pf[k], k)
        self.assertAlmostEqual(s2["copy"] + s2["copy_url"], pf["copy"], places=9)
        for kind in ("memory", "stream"):
            parts = (kind, kind + "_bundle", kind + "_page")
            self.assertAlmostEqual(sum(s2[p] for p in parts), pf[kind], places=9, msg=kind)
            for p in parts:  # stage 1's split of that kind, to the 3rd decimal of a share
                self.assertAlmostEqual(s2[p] / pf[kind], s1[p] / sum(s1[q] for q in parts), delta=0.006, msg=p)

    def test_probes_full_chains_moves_only_the_page_rounds_share_to_the_chains(self):
        s2c, s2b, pf = train.MIXES["probes-full-chains"], train.MIXES["probes-full-bundles"], train.MIXES["probes-full"]
        self.assertAlmostEqual(sum(s2c.values()), 1.0, places=9)
        self.assertEqual(set(s2c), set(s2b))
        for k in ("score", "score_full", "score_absent", "copy", "copy_url", "memory_bundle", "stream_bundle"):
            self.assertEqual(s2c[k], s2b[k], k)
        for kind in ("memory", "stream"):
            self.assertAlmostEqual(s2c[kind] + s2c[kind + "_bundle"] + s2c[kind + "_page"], pf[kind], places=9, msg=kind)
            self.assertGreater(s2c[kind], s2b[kind])  # more chains, fewer page rounds
            self.assertLess(s2c[kind + "_page"], s2b[kind + "_page"])

    def test_bundles_pages_stream_raises_the_chains_full_rounds_from_page_and_bundle_memory_rounds(self):
        st, url = train.MIXES["bundles-pages-stream"], train.MIXES["bundles-pages-url"]
        self.assertAlmostEqual(sum(st.values()), 1.0, places=9)
        self.assertEqual(set(st), set(url))
        for k in ("memory", "stream_bundle", "score", "copy", "copy_url"):
            self.assertEqual(st[k], url[k], k)
        self.assertAlmostEqual(st["stream"], 0.16, places=9)  # from 0.07
        # what the chains' full rounds gained came from the page rounds and the bundles' memory rounds, by hand
        self.assertAlmostEqual(url["memory_page"] - st["memory_page"], 0.05, places=9)
        self.assertAlmostEqual(url["stream_page"] - st["stream_page"], 0.02, places=9)
        self.assertAlmostEqual(url["memory_bundle"] - st["memory_bundle"], 0.02, places=9)

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


class UrlDrill(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import json
        with open(os.path.join(ROOT, "models", "mempo-tiny", "tokenizer.json")) as f:
            cls.tok = json.load(f)
        cls.inv = {i: t for t, i in cls.tok["model"]["vocab"].items()}

    def text(self, ids):
        return "".join(self.inv[i] for i in ids).replace("\u0120", " ").replace("\u010a", "\n")

    def test_bpe_ids_are_the_runtime_tokenizers(self):
        # ids printed by @huggingface/tokenizers' Tokenizer over models/mempo-tiny/tokenizer.json (2026-12-04)
        self.assertEqual(train.bpe_ids("[Doc 1](https://world.wiki/Lelos_Stuzo):\n Lelos Stuzo was", self.tok),
                         [104, 1701, 1605, 106, 53, 117, 1744, 125, 128, 71, 60, 60, 132, 1550, 121, 113, 59, 132, 118, 120,
                          118, 60, 486, 108, 304, 1699, 23, 485, 303, 1565])
        self.assertEqual(train.bpe_ids("<access>https://world.wiki/", self.tok),
                         [73, 1707, 112, 1659, 75, 117, 1744, 125, 128, 71, 60, 60, 132, 1550, 121, 113, 59, 132, 118, 120, 118, 60])
        self.assertEqual(train.bpe_ids("</access>", self.tok), [73, 60, 1707, 112, 1659, 75])
        with self.assertRaisesRegex(SystemExit, "ASCII only"):
            train.bpe_ids("Zoë", self.tok)

    def test_the_target_is_the_url_of_the_name_spelt_before_access(self):
        import random
        import re
        shared = 0
        for s in train.url_samples(200, random.Random(3), train.whole_word_pairs()):
            c, o = self.text(s["c"]), self.text(s["o"])
            self.assertEqual(s["p"], "copy_url")
            self.assertTrue(c.endswith("<access>https://world.wiki/"), c[-40:])
            self.assertTrue(o.endswith("</access>"), o)
            tail = o[: -len("</access>")]
            heads = re.findall(r"\]\(https://world\.wiki/([A-Za-z_]+)\):((?: [A-Z][a-z]+)+)", c)
            self.assertGreaterEqual(len(heads), 2, c)
            for url, name in heads:  # every head: the URL spells the name that follows it (then filler words)
                self.assertEqual(url.split("_"), name.split()[: len(url.split("_"))])
            self.assertIn(tail, [u for u, _ in heads])
            # the name spelt (spaced) just before <access> is the target's, after any filler words
            cue = c[c.rindex("):") :]
            self.assertIn(" " + tail.replace("_", " "), cue)
            firsts = [u.split("_")[0] for u, _ in heads]
            shared += any(f == tail.split("_")[0] and u != tail for f, (u, _) in zip(firsts, heads))
        self.assertGreater(shared, 50)  # often another URL shares the first word: only the later words tell


if __name__ == "__main__":
    unittest.main()
