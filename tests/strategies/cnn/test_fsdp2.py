"""`--trainer.strategy fsdp2` on the CNN example: its ResNet sharded by its own units trains as DDP does; a backbone
with no known units is refused. The strategy itself is tested on the suite's small model in tests/strategies/."""

import pytest

from tests.helpers.sharded_runs import assert_fsdp2_refuses, assert_fsdp2_trains_as_ddp


def test_a_backbone_without_sharding_units_fails_in_one_line_and_writes_nothing(capsys, tmp_path, shapes_root):
    backbone = ("--model.init_args.backbone", "mobilenet_v3_small")
    message = "backbone 'mobilenet_v3_small' has no known sharding units; the fsdp2 strategy shards ResNets"
    assert_fsdp2_refuses(capsys, tmp_path, shapes_root, "cnn.yaml", backbone, message)


@pytest.mark.slow  # 30 to 60 s on two idle cores
def test_fsdp2_trains_the_cnn_as_ddp_does(tmp_path, shapes_root):
    assert_fsdp2_trains_as_ddp(tmp_path, shapes_root, "cnn.yaml")
