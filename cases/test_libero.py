"""The evaluation cases: one item per selected cell, one real rollout per item.

The cell, the policy and the bench service come from pytest-libero's fixtures; the outcome
follows the protocol: native success passes, truncation or a policy fault fails, a simulator
or harness fault errors.
"""


def test_rollout(libero_episode):
    libero_episode.check()
