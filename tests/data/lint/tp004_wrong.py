"""order='F' used as 'load it transposed': index and shape then refer to the reversed
axes, so with square tiles this compiles and reads the wrong tile (with tm != tk the
shapes no longer fit ct.mma and it fails to compile)."""
import cuda.tile as ct

ORACLE = [{"kernel": "xt_times_w", "args": ("f16:2", "f16:2", "f32:2", 16, 16), "compiles": True}]


@ct.kernel
def xt_times_w(x, w, out, tm: ct.Constant[int], tk: ct.Constant[int]):
    # want x^T: load x's (tk, tm) tile and flip it
    xt = ct.load(x, index=(0, ct.bid(0)), shape=(tk, tm), order='F')  # expect: TP004
    wt = ct.load(w, index=(0, 0), shape=(tk, tm))
    acc = ct.mma(xt, wt, ct.zeros((tm, tm), dtype=ct.float32))
    ct.store(out, index=(ct.bid(0), 0), tile=acc)
