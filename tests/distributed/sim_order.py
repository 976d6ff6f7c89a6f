"""The sim backend's ordering: a non-blocking send paired with a blocking
receive (each rank sends to and receives from the other, 16 MB, past any eager
limit), non-blocking collectives waited on out of order and behind blocking
ones, and their results. Each rank prints ``OK``."""

from __future__ import annotations

import rtxcore as rc
import rtxcore.distributed as dist


def main() -> None:
    dist.init_process_group("sim")
    n, r = dist.get_world_size(), dist.get_rank()
    # the exchange: every rank's isend before its recv (a deferred blocking send
    # would wait for a receive its peer had not posted)
    to, frm = (r + 1) % n, (r - 1) % n
    x, y = rc.full((4 << 20,), float(r)), rc.empty(4 << 20)
    w = dist.isend(x, to)
    dist.recv(y, frm)
    w.wait()
    assert y[0].item() == frm and y[-1].item() == frm
    # collectives issued non-blocking, a blocking one after them, waited on last
    # first: the host runs them in the order issued on every rank
    a, b = rc.full((1000,), float(r)), rc.full((3 << 20,), 1.0)
    wa = dist.all_reduce(a, async_op=True)
    wb = dist.all_reduce(b, async_op=True)
    c = rc.full((10,), 2.0)
    dist.all_reduce(c)
    wb.wait()
    assert wa.is_completed() or wa.wait()
    wa.wait()
    assert a[0].item() == sum(range(n)) and b[7].item() == n and c[0].item() == 2.0 * n
    print(f"OK {r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
