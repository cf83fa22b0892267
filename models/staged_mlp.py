"""A multilayer perceptron for small images, declared as a chain of stages."""

from torch import nn

from models.staged import even_groups, run_stages


class StagedMLP(nn.Module):
    """Flatten, then Linear+ReLU blocks, then a Linear classifier, grouped into `num_stages` stages.

    The default 784-200-10 in two stages is the reference's layer-per-GPU network.
    """

    def __init__(
        self, input_size: int = 784, hidden_sizes: tuple[int, ...] = (200,), num_classes: int = 10, num_stages: int = 2
    ):
        super().__init__()
        sizes = [input_size, *hidden_sizes]
        blocks: list[nn.Module] = [
            nn.Sequential(nn.Linear(n_in, n_out), nn.ReLU()) for n_in, n_out in zip(sizes, sizes[1:])
        ]
        blocks.append(nn.Linear(sizes[-1], num_classes))
        stages = [nn.Sequential(*(blocks[i] for i in group)) for group in even_groups(len(blocks), num_stages)]
        stages[0].insert(0, nn.Flatten())
        self.blocks = nn.ModuleList(stages)

    def stages(self) -> list[nn.Module]:
        return list(self.blocks)

    def sharding_units(self) -> list[nn.Module]:
        """Each layer with its activation (`trainrig.strategies.sharding.ShardedModel`)."""
        return [block for stage in self.blocks for block in stage if not isinstance(block, nn.Flatten)]

    def tensor_parallel_plan(self) -> dict[str, str]:
        """Linear layers in column-then-row pairs, as Megatron splits an MLP: the activation between them stays
        split, and only the pair's output is summed across processes. With an odd number of layers the first
        stays whole."""
        linears = [name for name, module in self.named_modules() if isinstance(module, nn.Linear)]
        paired = linears[len(linears) % 2 :]
        return {name: "colwise" if index % 2 == 0 else "rowwise" for index, name in enumerate(paired)}

    def forward(self, images):
        return run_stages(self.stages(), images)
