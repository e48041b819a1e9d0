"""training/train.py's distillation targets: which teacher each target learns from (tensorize) and
the loss with two teachers (loss_fn), against KL written out by hand.

    PYTHONPATH=learner:training /usr/bin/python3 -m unittest discover -s test/python -p 'test_*.py'
"""
import os
import sys
import unittest

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "training"))
sys.path.insert(0, os.path.join(ROOT, "learner", "mempo_learner"))

import train  # noqa: E402
from model import Config, TinyLM  # noqa: E402

# context ids, output ids: output token t is a target at position (len(c) - 1 + t)
MEM = {"p": "memory", "c": [1, 2, 3], "o": [4, 5]}
ROLL = {"p": "rollout", "c": [6, 7], "o": [8, 9, 10]}
PROBE = {"p": "score_full", "c": [11, 12], "o": [13]}
COPY = {"p": "copy", "c": [14, 15], "o": [16, 17]}


def small_lm(seed):
    torch.manual_seed(seed)
    return TinyLM(Config(vocab_size=32, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64))


class Teach(unittest.TestCase):
    def row(self, distilled=train.AGENT_KINDS, rollout_teacher=False):
        _, _, _, tgt, _, teach = train.tensorize([[MEM, ROLL, PROBE, COPY]], distilled, rollout_teacher)
        return tgt[0].tolist(), teach[0].tolist()

    def test_agent_rounds_learn_from_init_and_the_rest_from_the_gold(self):
        tgt, teach = self.row()
        # positions: MEM 0-4, ROLL 5-9, PROBE 10-12, COPY 13-16; targets sit one before their token
        self.assertEqual(tgt, [-100, -100, 4, 5, -100, -100, 8, 9, 10, -100, -100, 13, -100, -100, 16, 17, -100])
        self.assertEqual(teach, [0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0])

    def test_rollout_teacher_takes_the_rollout_targets_only(self):
        _, teach = self.row(rollout_teacher=True)
        self.assertEqual(teach, [0, 0, 1, 1, 0, 0, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0])

    def test_anchor_probes_holds_the_probe_targets_to_init(self):
        _, teach = self.row(train.AGENT_KINDS + train.PROBE_KINDS, True)
        self.assertEqual(teach, [0, 0, 1, 1, 0, 0, 2, 2, 2, 0, 0, 1, 0, 0, 0, 0, 0])


class Loss(unittest.TestCase):
    def setUp(self):
        self.lm, self.t1, self.t2 = small_lm(1), small_lm(2), small_lm(3)
        self.batch = train.tensorize([[MEM, ROLL, PROBE, COPY]], train.AGENT_KINDS + train.PROBE_KINDS, True)

    @staticmethod
    def log_probs(lm, ids, pos, seg):
        return torch.log_softmax(lm.logits(train.lm_hidden(lm, ids, pos, seg)), -1)[0]

    def test_two_teachers_by_hand(self):
        ids, pos, seg, tgt, aux, teach = self.batch
        with torch.no_grad():
            loss, main, ntok = train.loss_fn(self.lm, ids, pos, seg, tgt, aux, 0.0, [self.t1, self.t2], teach, 3.0)
            q = self.log_probs(self.lm, ids, pos, seg)
            p1 = self.log_probs(self.t1, ids, pos, seg)
            p2 = self.log_probs(self.t2, ids, pos, seg)
        total, n = 0.0, 0
        for i, (y, k) in enumerate(zip(tgt[0].tolist(), teach[0].tolist())):
            if y < 0:
                continue
            n += 1
            if k == 0:
                total += -float(q[i, y])
            else:
                p = (p1 if k == 1 else p2)[i]
                total += 3.0 * float((p.exp() * (p - q[i])).sum())
        self.assertEqual(ntok, 8)
        self.assertEqual(n, 8)
        self.assertAlmostEqual(float(loss), total / n, places=5)
        # `main` is the cross-entropy of every target, whatever it learns from
        ce = -sum(float(q[i, y]) for i, y in enumerate(tgt[0].tolist()) if y >= 0) / n
        self.assertAlmostEqual(float(main), ce, places=5)

    def test_a_student_equal_to_its_teachers_pays_only_the_cross_entropy_targets(self):
        ids, pos, seg, tgt, aux, teach = self.batch
        with torch.no_grad():
            loss, _, _ = train.loss_fn(self.lm, ids, pos, seg, tgt, aux, 0.0, [self.lm, self.lm], teach, 5.0)
            q = self.log_probs(self.lm, ids, pos, seg)
        # only the copy drill's two targets (positions 14, 15) are cross-entropy
        want = -(float(q[14, 16]) + float(q[15, 17])) / 8
        self.assertAlmostEqual(float(loss), want, places=5)


if __name__ == "__main__":
    unittest.main()
