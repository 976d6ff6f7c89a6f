"""The backend's C threads, for work that needs no Python: BLAS calls.

Handing a part of a product to one of ``fused.pool``'s Python threads and
waiting for it costs 20-50 us on a 2-core VM: the worker sleeps in the kernel,
is woken through it, then takes the GIL. A product of a small model's size --
LSTM's (64, 128) @ (128, 512), 4.2M multiply-adds, ~95 us on one core -- gains
nothing from a second core at that price, and such products are most of a
recurrent or small transformer step. PyTorch's OpenMP threads spin between
parallel regions; these do the same, briefly:

- a pool of C threads (``pthread``), made at first use, sized to
  ``fused.threads()`` with the calling thread; a job is a number of parts, each
  claimed by whichever thread gets to it first (the calling thread too), so a
  part's result never depends on which thread ran it;
- after a job a worker spins for ``SPIN_US`` microseconds (a ``pause`` loop
  that yields the core every few microseconds to anything else runnable), then
  sleeps on a condition variable until the next;
- ``fused.pool()`` -- the Python pool, about to be handed work -- sends the
  spinning workers to sleep first (``pool_hush``): a spinning C thread would
  take the core a Python worker needs (GPT's GELU, 512K elements on the Python
  pool right after a product, took 1.9 ms beside a spinner);
- one job at a time: a call made while another thread's job runs does its parts
  on its own thread (the same parts, so the same bits);
- a child made by ``fork`` starts with no workers and makes its own.

The parts here are ``cblas_?gemm`` calls into NumPy's own OpenBLAS (the
function looked up by name in the library NumPy loaded, and only where its
integer width is known: ``scipy_cblas_?gemm64_``, ``cblas_?gemm64_`` with 64-bit
ints, ``cblas_?gemm`` with 32), each with the arguments NumPy's ``matmul`` would
pass for that block: ``blas.matmul_kernel`` decides the blocks, this runs them.
The C source is fixed text; only pointers and ints validated by ``blas`` (each
operand's leading dimension at least its row length, every dim positive) cross
into it. ``RTX_CPU_CC=0``, no compiler, or a BLAS without those names: the
blocks run on ``fused.pool`` instead.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from . import cfused, fused

SPIN_US = 1000  # a worker's spin after a job: longer than the gaps between a
# step's products (an LSTM's cell and Python's work between two: ~100-300 us); a
# sleeping worker takes ~30 us to wake on a 2-core VM, a (64, 128) @ (128, 512)
# product 53 us on 2 hot threads, 82 with a wake, 97 on one

_SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#define RTX_PAUSE() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define RTX_PAUSE() __asm__ __volatile__("yield")
#else
#define RTX_PAUSE() ((void)0)
#endif
#define MAXW 63
#define SEQ __ATOMIC_SEQ_CST

typedef void (*part_fn)(const void *job, int64_t part);

static pthread_mutex_t run_mu = PTHREAD_MUTEX_INITIALIZER;  /* one job at a time */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;      /* sleeping workers */
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int nworkers, sleepers, registered;
/* the job: (generation << 32) | next part to claim; a worker claims a part of
   the generation it was woken for only (compare-and-swap), never a later job's */
static uint64_t ticket;
static part_fn job_fn;
static const void *job_arg;
static int64_t job_parts, done_parts;
static int job_threads;
static int64_t spin_ns = 200000;
static uint64_t hush;  /* bumped by pool_hush: spinning workers go to sleep */

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void drain(uint64_t gen) {
    for (;;) {
        uint64_t t = __atomic_load_n(&ticket, SEQ);
        if ((t >> 32) != gen || (int64_t)(t & 0xffffffffu) >= __atomic_load_n(&job_parts, SEQ))
            return;
        if (!__atomic_compare_exchange_n(&ticket, &t, t + 1, 0, SEQ, SEQ)) continue;
        job_fn(job_arg, (int64_t)(t & 0xffffffffu));
        __atomic_fetch_add(&done_parts, 1, SEQ);
    }
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    uint64_t seen = __atomic_load_n(&ticket, SEQ) >> 32;
    uint64_t h = __atomic_load_n(&hush, SEQ);
    int idle = 0;  /* not one of the last job's threads: sleep at once */
    for (;;) {
        int64_t t0 = now_ns();
        unsigned k = 0;
        uint64_t gen;
        while ((gen = __atomic_load_n(&ticket, SEQ) >> 32) == seen) {
            if (!idle) {
                RTX_PAUSE();
                if ((++k & 15) != 0)
                    continue;
                int hushed = __atomic_load_n(&hush, SEQ) != h;
                if (!hushed && (k & 255) != 0)
                    continue;
                if (!hushed && now_ns() - t0 <= spin_ns) {
                    sched_yield();  /* (every ~10 us: anything else runnable here goes first) */
                    continue;
                }
            }
            pthread_mutex_lock(&mu);  /* sleep until the next job */
            __atomic_fetch_add(&sleepers, 1, SEQ);
            while ((gen = __atomic_load_n(&ticket, SEQ) >> 32) == seen)
                pthread_cond_wait(&cv, &mu);
            __atomic_fetch_sub(&sleepers, 1, SEQ);
            pthread_mutex_unlock(&mu);
            break;
        }
        seen = gen;
        h = __atomic_load_n(&hush, SEQ);  /* (a hush from here on, while it drains too, counts) */
        idle = id + 1 >= __atomic_load_n(&job_threads, SEQ);
        if (!idle) drain(gen);
    }
    return 0;
}

static void after_fork_in_child(void) {
    /* the workers are gone: the child makes its own */
    pthread_mutex_init(&run_mu, 0);
    pthread_mutex_init(&mu, 0);
    pthread_cond_init(&cv, 0);
    nworkers = 0;
    sleepers = 0;
}

/* parts 0..parts-1 of fn on up to `threads` threads (this one included) */
void pool_run(part_fn fn, const void *arg, int64_t parts, int threads) {
    if (threads > MAXW + 1) threads = MAXW + 1;
    if (threads <= 1 || parts <= 1 || parts >= 0x7fffffff ||
            pthread_mutex_trylock(&run_mu) != 0) {
        for (int64_t p = 0; p < parts; p++) fn(arg, p);
        return;
    }
    if (!registered) registered = pthread_atfork(0, 0, after_fork_in_child) == 0;
    while (nworkers < threads - 1) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int bad = pthread_create(&th, &attr, worker, (void *)(intptr_t)nworkers);
        pthread_attr_destroy(&attr);
        if (bad) break;
        nworkers++;
    }
    /* close the last job's ticket first: a worker still in its drain() with the
       last ticket read must fail its compare-and-swap, never claim a part of this
       job under the old generation while the fields below change */
    uint64_t last = __atomic_load_n(&ticket, SEQ) >> 32;
    __atomic_store_n(&ticket, last << 32 | 0xffffffffu, SEQ);
    job_fn = fn;
    job_arg = arg;
    __atomic_store_n(&job_parts, parts, SEQ);
    __atomic_store_n(&job_threads, threads, SEQ);
    __atomic_store_n(&done_parts, 0, SEQ);
    uint64_t gen = (last + 1) & 0xffffffffu;
    __atomic_store_n(&ticket, gen << 32, SEQ);
    if (__atomic_load_n(&sleepers, SEQ)) {
        pthread_mutex_lock(&mu);
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    drain(gen);
    for (unsigned k = 1; __atomic_load_n(&done_parts, SEQ) < parts; k++) {
        RTX_PAUSE();
        if ((k & 255) == 0) sched_yield();  /* (a preempted worker holds the last part) */
    }
    pthread_mutex_unlock(&run_mu);
}

void pool_spin(int64_t ns) { spin_ns = ns; }
/* the Python pool is about to run: leave it the cores (spin no more) */
void pool_hush(void) { __atomic_fetch_add(&hush, 1, SEQ); }
int pool_workers(void) { return nworkers; }

/* fn(p0 + lo, ..., hi - lo) over blocks [lo, hi) of `block` elements of n: an
   elementwise C loop whose arrays are contiguous, `nargs` of them (at most 6) */
struct spans {
    void *fn;
    int nargs;
    int64_t n, block, itemsize;
    char *p[6];
};

typedef void (*loop1)(char *, int64_t);
typedef void (*loop2)(char *, char *, int64_t);
typedef void (*loop3)(char *, char *, char *, int64_t);
typedef void (*loop4)(char *, char *, char *, char *, int64_t);
typedef void (*loop5)(char *, char *, char *, char *, char *, int64_t);
typedef void (*loop6)(char *, char *, char *, char *, char *, char *, int64_t);

static void span_part(const void *job, int64_t part) {
    const struct spans *s = job;
    int64_t lo = part * s->block, hi = lo + s->block < s->n ? lo + s->block : s->n;
    char *q[6];
    for (int i = 0; i < s->nargs; i++) q[i] = s->p[i] + lo * s->itemsize;
    int64_t m = hi - lo;
    switch (s->nargs) {
    case 1: ((loop1)s->fn)(q[0], m); break;
    case 2: ((loop2)s->fn)(q[0], q[1], m); break;
    case 3: ((loop3)s->fn)(q[0], q[1], q[2], m); break;
    case 4: ((loop4)s->fn)(q[0], q[1], q[2], q[3], m); break;
    case 5: ((loop5)s->fn)(q[0], q[1], q[2], q[3], q[4], m); break;
    case 6: ((loop6)s->fn)(q[0], q[1], q[2], q[3], q[4], q[5], m); break;
    }
}

void spans(void *fn, int nargs, int64_t n, int64_t block, int64_t itemsize, int threads,
           char *p0, char *p1, char *p2, char *p3, char *p4, char *p5) {
    struct spans s = {fn, nargs, n, block, itemsize, {p0, p1, p2, p3, p4, p5}};
    if (nargs < 1 || nargs > 6 || n <= 0 || block <= 0) return;
    pool_run(span_part, &s, (n + block - 1) / block, threads);
}

/* C = A @ B by blocks of C's rows (axis 0) or columns (1), or a batch of whole
   products; row-major, A and B transposed or not (111: no, 112: yes) */
struct gemm {
    void *f;
    int ilp64, ta, tb, axis;
    int64_t m, n, k, lda, ldb, ldc, size, parts, align;
    char *a, *b, *c;
    int64_t nb1, sa0, sa1, sb0, sb1, sc0, sc1;  /* batch: matrix j at (j / nb1, j % nb1) */
};
"""

_GEMM = r"""
typedef void (*gemm64_{S})(int, int, int, int64_t, int64_t, int64_t, {T}, const {T} *, int64_t,
                           const {T} *, int64_t, {T}, {T} *, int64_t);
typedef void (*gemm32_{S})(int, int, int, int, int, int, {T}, const {T} *, int,
                           const {T} *, int, {T}, {T} *, int);

static void call_{S}(const struct gemm *g, int64_t m, int64_t n, const {T} *a, const {T} *b,
                     {T} *c) {
    if (g->ilp64)
        ((gemm64_{S})g->f)(101, g->ta, g->tb, m, n, g->k, 1, a, g->lda, b, g->ldb, 0, c, g->ldc);
    else
        ((gemm32_{S})g->f)(101, g->ta, g->tb, (int)m, (int)n, (int)g->k, 1, a, (int)g->lda, b,
                           (int)g->ldb, 0, c, (int)g->ldc);
}

static void block_{S}(const void *job, int64_t p) {
    const struct gemm *g = job;
    const {T} *a = (const {T} *)g->a, *b = (const {T} *)g->b;
    {T} *c = ({T} *)g->c;
    int64_t lo = g->size * p / g->parts / g->align * g->align;
    int64_t hi = p + 1 == g->parts ? g->size : g->size * (p + 1) / g->parts / g->align * g->align;
    if (hi <= lo) return;
    if (g->axis == 0)
        call_{S}(g, hi - lo, g->n, a + (g->ta == 111 ? lo * g->lda : lo), b, c + lo * g->ldc);
    else
        call_{S}(g, g->m, hi - lo, a, b + (g->tb == 111 ? lo : lo * g->ldb), c + lo);
}

static void matrix_{S}(const void *job, int64_t j) {
    const struct gemm *g = job;
    int64_t i0 = j / g->nb1, i1 = j % g->nb1;
    call_{S}(g, g->m, g->n,
             (const {T} *)(g->a + i0 * g->sa0 + i1 * g->sa1),
             (const {T} *)(g->b + i0 * g->sb0 + i1 * g->sb1),
             ({T} *)(g->c + i0 * g->sc0 + i1 * g->sc1));
}

/* blocks (nb1 == 0) or nb matrices (strides in bytes) */
void gemm_{S}(void *f, int ilp64, int ta, int tb, int axis, int64_t m, int64_t n, int64_t k,
              char *a, int64_t lda, char *b, int64_t ldb, char *c, int64_t ldc,
              int64_t parts, int64_t align, int64_t nb, int64_t nb1, int64_t sa0, int64_t sa1,
              int64_t sb0, int64_t sb1, int64_t sc0, int64_t sc1, int threads) {
    struct gemm g = {f, ilp64, ta, tb, axis, m, n, k, lda, ldb, ldc, axis ? n : m, parts, align,
                     a, b, c, nb1, sa0, sa1, sb0, sb1, sc0, sc1};
    if (nb1)
        pool_run(matrix_{S}, &g, nb, threads);
    else
        pool_run(block_{S}, &g, parts, threads);
}
"""

_P, _I, _C = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
# the BLAS names tried in NumPy's library, with their integer width
_NAMES = (("scipy_cblas_{p}gemm64_", True), ("cblas_{p}gemm64_", True), ("cblas_{p}gemm", False))
_lock = threading.Lock()
_state: dict[np.dtype, tuple[Any, int, bool]] | None = None  # dtype -> (gemm_, sgemm address, ilp64)


def _load() -> dict[np.dtype, tuple[Any, int, bool]]:
    """Compile and load the pool, once per process; {dtype: (our gemm, BLAS
    function address, ilp64)} for the float types NumPy's BLAS gives ({} where
    there is no BLAS by those names, or no pool)."""
    global _state, _spans
    with _lock:
        if _state is not None:
            return _state
        _state = {}
        src = _SOURCE + "".join(_GEMM.replace("{S}", s).replace("{T}", t)
                                for s, t in cfused.FLOAT_TYPES.values())
        lib = None if cfused._compiler() is None else \
            cfused.library(src, "the backend's C threads", extra=("-pthread",))
        if lib is None:
            return _state
        lib.pool_run.restype = None
        lib.pool_spin.argtypes, lib.pool_spin.restype = [_I], None
        lib.pool_spin(SPIN_US * 1000)
        lib.pool_hush.argtypes, lib.pool_hush.restype = [], None
        fused.hush = lib.pool_hush
        lib.spans.argtypes = [_P, _C, _I, _I, _I, _C] + [_P] * 6
        lib.spans.restype = None
        _spans = lib.spans
        blas = _numpy_blas()
        for dt, (suffix, _) in cfused.FLOAT_TYPES.items():
            prefix = "s" if dt == np.float32 else "d"
            fn = None
            for name, ilp64 in _NAMES:
                fn = getattr(blas, name.format(p=prefix), None) if blas is not None else None
                if fn is not None:
                    break
            if fn is None:
                continue
            gemm = getattr(lib, "gemm_" + suffix)
            gemm.argtypes = [_P, _C, _C, _C, _C, _I, _I, _I, _P, _I, _P, _I, _P, _I,
                             _I, _I, _I, _I, _I, _I, _I, _I, _I, _I, _C]
            gemm.restype = None
            _state[dt] = (gemm, ctypes.cast(fn, ctypes.c_void_p).value, ilp64)
        return _state


_spans: Any = None


def spans(fn: int, n: int, block: int, itemsize: int, *pointers: int) -> bool:
    """``fn(p0 + lo, ..., hi - lo)`` -- a C loop over contiguous arrays, ``fn`` the
    address of a function of one of the backend's libraries -- over ``n`` elements in
    blocks of ``block``, on the C threads (each block on whichever comes first:
    an elementwise loop's bits do not depend on it). False where the C pool is
    not at hand (nothing ran)."""
    if _state is None:
        _load()
    if _spans is None:
        return False
    t = 1 if fused.in_pool() else fused.threads()
    ptrs = list(pointers) + [None] * (6 - len(pointers))
    _spans(fn, len(pointers), n, block, itemsize, t, *ptrs)
    return True


def _numpy_blas() -> Any:
    """NumPy's BLAS library (already loaded by NumPy), or None."""
    try:
        from threadpoolctl import ThreadpoolController

        paths = [c.filepath for c in ThreadpoolController().select(user_api="blas").lib_controllers
                 if "numpy" in (c.filepath or "")]
        return ctypes.CDLL(paths[0]) if len(paths) == 1 else None
    except Exception:  # not installed, not loadable
        return None


def gemm(dtype: np.dtype) -> tuple[Any, int, bool] | None:
    """(gemm_<type>, BLAS address, ilp64) for ``dtype``, or None: no C pool for it."""
    return (_state if _state is not None else _load()).get(dtype)
