"""The FLOPs of a training step that MFU divides (trainrig/monitoring/throughput.py), counted on the meta device, and
the throughput callback every run gets."""

import torch
from lightning.pytorch import LightningModule
from torch import nn

from trainrig.monitoring.throughput import Throughput, flops_per_batch, with_throughput


class TwoLayers(LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.network = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4, 3))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.network(inputs)


def test_a_steps_flops_are_its_matrix_products_forward_and_backward_without_touching_the_module():
    module = TwoLayers()
    weights = {name: tensor.clone() for name, tensor in module.state_dict().items()}
    batch = (torch.randn(5, 6), torch.zeros(5, dtype=torch.long))
    random_state = torch.get_rng_state()
    first, second = 2 * 5 * 6 * 4, 2 * 5 * 4 * 3  # forward matrix products
    # Backward: the second layer's gradients for its weight and its input, the first layer's for its weight only.
    assert flops_per_batch(module, batch) == first + second + 2 * second + first
    assert torch.equal(torch.get_rng_state(), random_state), "no random numbers drawn (the dropout ran on meta)"
    assert all(torch.equal(module.state_dict()[name], tensor) for name, tensor in weights.items())
    assert all(parameter.device.type == "cpu" and parameter.grad is None for parameter in module.parameters())


def test_every_run_gets_one_throughput_callback_first_unless_its_config_has_its_own():
    own = Throughput()
    assert with_throughput([own]) == [own]
    added = with_throughput([nn.Identity()])
    assert isinstance(added[0], Throughput) and len(added) == 2
