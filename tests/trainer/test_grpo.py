"""GRPO advantages and loss against hand-computed values."""

import math

import pytest
import torch

from trainer.algorithms.grpo import group_advantages, k3_kl, leave_one_out_advantages, policy_loss


def test_grpo_advantages_hand_computed():
    # mean 0.5, population std 0.5 -> (r - 0.5) / 0.5
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.2, 0.2, 0.2, 1.0]]))
    assert torch.allclose(adv[0], torch.tensor([1.0, -1.0, -1.0, 1.0]), atol=1e-5)
    # second row: mean 0.4, std sqrt(((0.2)^2*3 + 0.6^2)/4) = sqrt(0.12) = 0.34641
    std = math.sqrt(0.12)
    expected = torch.tensor([-0.2 / std, -0.2 / std, -0.2 / std, 0.6 / std])
    assert torch.allclose(adv[1], expected, atol=1e-4)


def test_dr_grpo_advantages_are_mean_centred_only():
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), normalize_std=False)
    assert torch.allclose(adv, torch.tensor([[0.5, -0.5, -0.5, 0.5]]))


def test_rloo_advantages_use_the_mean_of_the_other_samples():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5]])
    adv = leave_one_out_advantages(rewards)
    # sample 0: 1 - mean(0, 0, 1) = 2/3; sample 1: 0 - mean(1, 0, 1) = -2/3
    expected = torch.tensor([[2 / 3, -2 / 3, -2 / 3, 2 / 3], [0.0, 0.0, 0.0, 0.0]])
    assert torch.allclose(adv, expected, atol=1e-6)
    for row in range(2):  # the closed form G/(G-1) * (r - mean) holds row by row
        r = rewards[row]
        assert torch.allclose(adv[row], 4 / 3 * (r - r.mean()), atol=1e-6)
    with pytest.raises(ValueError, match="G >= 2"):
        leave_one_out_advantages(torch.tensor([[1.0]]))


def test_equal_rewards_give_zero_advantage_not_nan():
    adv = group_advantages(torch.tensor([[0.2, 0.2, 0.2], [0.0, 0.0, 0.0]]))
    assert torch.equal(adv, torch.zeros(2, 3))


def test_advantages_reject_bad_shapes():
    with pytest.raises(ValueError, match="G >= 2"):
        group_advantages(torch.tensor([[1.0], [0.0]]))
    with pytest.raises(ValueError):
        group_advantages(torch.tensor([1.0, 0.0]))


def test_k3_hand_computed():
    lp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    q = math.log(0.5)
    assert k3_kl(lp, ref).item() == pytest.approx(math.exp(q) - q - 1, rel=1e-6)
    assert k3_kl(lp, lp).item() == 0.0


def test_on_policy_loss_is_minus_mean_token_advantage():
    mask = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    lp = torch.full((2, 3), -1.0, requires_grad=True)
    out = policy_loss(lp, lp.detach().clone(), torch.tensor([1.0, -1.0]), mask)
    # tokens: A=1 twice, A=-1 once -> (-1 - 1 + 1) / 3
    assert out.loss.item() == pytest.approx(-1.0 / 3.0)
    assert out.tokens == 3 and out.clipped_sum == 0
    out.loss.backward()
    # d/d logp of -A * exp(lp - old) / 3 at lp == old is -A / 3 on masked tokens
    expected = torch.tensor([[0.0, -1 / 3, -1 / 3], [0.0, 1 / 3, 0.0]])
    assert torch.allclose(lp.grad, expected, atol=1e-6)


def test_clipping_hand_computed():
    old = torch.zeros(2, 1)
    lp = torch.full((2, 1), math.log(1.5))  # ratio 1.5, clip range [0.8, 1.2]
    mask = torch.ones(2, 1)
    pos = policy_loss(lp[:1], old[:1], torch.tensor([1.0]), mask[:1], clip_eps=0.2)
    assert pos.loss.item() == pytest.approx(-1.2, rel=1e-5)  # min(1.5, 1.2) * 1
    assert pos.clipped_sum == 1
    neg = policy_loss(lp[1:], old[1:], torch.tensor([-1.0]), mask[1:], clip_eps=0.2)
    assert neg.loss.item() == pytest.approx(1.5, rel=1e-5)  # -min(-1.5, -1.2)
    assert neg.clipped_sum == 0


@pytest.mark.parametrize("q", [100.0, -100.0, 1e4])
def test_k3_of_a_far_off_token_keeps_loss_and_gradient_finite(q):
    # q = log pi_ref - log pi; exp(q) overflows float32 from ~88.7 nats
    lp = torch.tensor([[-1.0 - q, -1.0]], requires_grad=True)
    ref = torch.tensor([[-1.0, -1.0]])
    out = policy_loss(lp, lp.detach().clone(), torch.tensor([1.0]), torch.ones(1, 2), ref_logprobs=ref, kl_coef=0.1)
    out.loss.backward()
    assert math.isfinite(out.loss.item()) and math.isfinite(out.kl_sum)
    assert torch.isfinite(lp.grad).all()
    assert 0.0 <= k3_kl(lp.detach(), ref)[0, 0].item() <= 10.0  # verl's bound


@pytest.mark.parametrize("q", [-3.0, -0.5, 0.0, 1e-3, 0.7, 2.0])
def test_k3_of_small_log_ratios_is_unclamped(q):
    lp = torch.tensor([-2.0], dtype=torch.float64, requires_grad=True)
    ref = lp.detach() + q
    kl = k3_kl(lp, ref)
    assert kl.item() == pytest.approx(math.exp(q) - q - 1, rel=1e-9, abs=1e-12)
    kl.sum().backward()  # d/d(logprobs) (exp(q) - q - 1) = 1 - exp(q)
    assert lp.grad.item() == pytest.approx(1 - math.exp(q), rel=1e-9, abs=1e-12)


def test_kl_penalty_added_per_token():
    lp = torch.full((1, 2), math.log(0.5))
    ref = torch.full((1, 2), math.log(0.25))
    q = math.log(0.5)
    k3 = math.exp(q) - q - 1
    out = policy_loss(lp, lp.clone(), torch.tensor([0.0]), torch.ones(1, 2), ref_logprobs=ref, kl_coef=0.1)
    assert out.loss.item() == pytest.approx(0.1 * k3, rel=1e-5)
    assert out.kl_sum == pytest.approx(2 * k3, rel=1e-5)


def test_micro_batches_sum_to_full_batch_loss():
    torch.manual_seed(0)
    lp, old = torch.randn(4, 5), torch.randn(4, 5)
    mask = (torch.rand(4, 5) > 0.3).float()
    adv = torch.randn(4)
    full = policy_loss(lp, old, adv, mask).loss
    total = mask.sum().item()
    parts = sum(policy_loss(lp[i:i + 2], old[i:i + 2], adv[i:i + 2], mask[i:i + 2], num_tokens_total=total).loss
                for i in (0, 2))
    assert parts.item() == pytest.approx(full.item(), rel=1e-5)


def test_kl_without_reference_is_rejected():
    x = torch.zeros(1, 1)
    with pytest.raises(ValueError, match="ref_logprobs"):
        policy_loss(x, x, torch.zeros(1), torch.ones(1, 1), kl_coef=0.1)
