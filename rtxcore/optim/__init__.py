"""Optimizers and learning-rate schedulers, as ``torch.optim``.

    opt = rtxcore.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = rtxcore.optim.lr_scheduler.StepLR(opt, step_size=10)
    for x, y in data:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    sched.step()
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "RMSprop", "lr_scheduler"]
