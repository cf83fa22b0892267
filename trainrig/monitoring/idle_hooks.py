"""Lightning's per-batch dispatch without the callbacks' hooks that do nothing.

At every batch Lightning calls each per-batch hook (six a training step) of every callback, overridden or not: for
each it reads `trainer.lightning_module`, builds the callback's `state_key` (a `repr` of a dict for a
`ModelCheckpoint`) into a profiler name and enters the profiler's context, then calls `Callback`'s empty method. A run
of the template has some 20 callbacks, of which a handful act at any batch, so about 110 of a training step's 120
callback calls do nothing: the largest single cost of the template over bare Lightning on a short step
(`benchmarks/host_time.py`), and on a GPU host time the device may wait for.

Lightning's dispatch (`lightning.pytorch.trainer.call._call_callback_hooks`) calls a hook only `if callable(fn)`.
Its maintainers considered calling only the hooks a callback overrides and left it (pytorch-lightning#10575); this
does it from outside: a hook that a callback's class inherits from `Callback` itself, and the callback does not set on
the instance, is set to `None` on that callback, and Lightning passes over it. A hook overridden anywhere in the
class's hierarchy, or set on the instance, is called as before, so nothing a callback does changes; a profiler the
config chooses lists only the hooks that ran. `tests/monitoring/test_idle_hooks.py` fails if Lightning stops
honouring it.
"""

from collections.abc import Iterable

from lightning.pytorch import Callback
from lightning.pytorch.utilities.model_helpers import is_overridden

__all__ = ["BATCH_HOOKS", "skip_idle_batch_hooks"]

BATCH_HOOKS = (
    "on_train_batch_start",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_train_batch_end",
    "on_validation_batch_start",
    "on_validation_batch_end",
    "on_test_batch_start",
    "on_test_batch_end",
    "on_predict_batch_start",
    "on_predict_batch_end",
)


def skip_idle_batch_hooks(callbacks: Iterable[Callback]) -> None:
    """Sets each per-batch hook that a callback leaves as `Callback`'s empty one to `None` on that callback."""
    for callback in callbacks:
        for name in BATCH_HOOKS:
            if not is_overridden(name, callback, parent=Callback):
                setattr(callback, name, None)
