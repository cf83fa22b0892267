"""How long a launched job's processes wait for a lost or late peer (the rendezvous and every collective) when the
user set no `--trainer.strategy.init_args.timeout`: minutes, not torch's 30, so that the survivors give up in time
and the scheduler restarts the job from its checkpoint."""

from datetime import timedelta

from trainrig.strategies.strategy_option import TIMEOUT_FLAG, flag_values, parse_timeout

__all__ = ["JOB_TIMEOUT", "check_timeouts"]

JOB_TIMEOUT = timedelta(minutes=5)


def check_timeouts(overrides: tuple[str, ...]) -> None:
    """Every timeout given after `--` is one the trainer reads, checked before the job is written."""
    for timeout in flag_values(list(overrides), TIMEOUT_FLAG)[0]:
        parse_timeout(timeout)
