"""How a launcher fills in the strategy's timeout: it reaches every strategy that takes one, also through a subclass's
**kwargs (the compiling DDP strategy that `ddp` names), and never overrides the user's own."""

from datetime import timedelta

from lightning.pytorch.strategies import DDPStrategy

import trainrig.strategies  # noqa: F401  registers the package's strategies
from trainrig.strategies.strategy_option import with_launcher_timeout

TEN_MINUTES = timedelta(minutes=10)


def test_the_launcher_timeout_reaches_ddp_by_name_through_its_subclass():
    entry = with_launcher_timeout("ddp", DDPStrategy, TEN_MINUTES)
    assert entry["class_path"] == "trainrig.strategies.compile.CompilingDDPStrategy"
    assert entry["init_args"]["timeout"] == "0:10:00"


def test_the_launcher_timeout_reaches_auto_and_the_projects_strategies():
    assert with_launcher_timeout("auto", DDPStrategy, TEN_MINUTES)["init_args"] == {"timeout": "0:10:00"}
    for name in ("pipeline", "fsdp2"):
        assert with_launcher_timeout(name, DDPStrategy, TEN_MINUTES)["init_args"]["timeout"] == "0:10:00", name


def test_the_users_timeout_stays_and_a_strategy_without_one_gets_none():
    own = {"class_path": "trainrig.strategies.compile.CompilingDDPStrategy", "init_args": {"timeout": "0:02:00"}}
    assert with_launcher_timeout(own, DDPStrategy, TEN_MINUTES)["init_args"] == {"timeout": "0:02:00"}
    assert "timeout" not in with_launcher_timeout("single_device", DDPStrategy, TEN_MINUTES)["init_args"]
