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
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["LBFGS", "SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "NAdam", "Optimizer",
           "RMSprop", "lr_scheduler"]


def __getattr__(name: str) -> object:
    # a PyTorch name left out on purpose says why (rtxcore/_unbuilt.py)
    from rtxcore._unbuilt import missing_attribute

    raise missing_attribute(__name__, name)
