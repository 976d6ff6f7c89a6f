"""``rtxcore.jit``: trace a function into a graph of primitive ops, read it, save
it, and run it again on any device.

    step = rtxcore.jit.trace(f, x)       # runs f(x) once, recording every kernel
    print(step.graph)                    # %7 = mul(%3, %5) : float32[64, 128]
    y = step(x2)                         # replays the graph (same shapes as traced)
    step.save("f.rtxg")                  # JSON graph + safetensors data, no pickle
    g = rtxcore.jit.load("f.rtxg")       # runs on the device of its arguments
    y = g(x2.to("opencl"))

What a graph holds: the kernels that ran (primitives, and the composites a
backend supplies as single nodes), the views they read and wrote, constants made
from host data, and the tensors the function read from outside -- module
parameters, optimizer state -- as named inputs, bound by reference while the
traced function lives and saved by value in a file. A forward, the autograd
engine's backward and an optimizer's in-place updates all run kernels, so a
whole training step traces into one graph.

What it does not hold: Python. Control flow is fixed to the path the example
took, Python numbers are constants (an optimizer's step count too), and random
ops replay the numbers drawn while tracing. Reading a tensor's value on the host
(``.item()``, ``bool(t)``, printing) while tracing is an error naming the line.
"""

from __future__ import annotations

from .compile import CompiledFunction, compile
from .graph import FORMAT, VERSION, Graph, Node, Ref, dumps  # noqa: F401
from .graph_file import LoadedGraph, load
from .trace import TraceError
from .traced import TracedFunction, trace

__all__ = ["trace", "load", "compile", "Graph", "Node", "Ref", "TracedFunction", "LoadedGraph",
           "CompiledFunction", "TraceError"]
