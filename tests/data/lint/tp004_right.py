"""Load in the array's own axis order, then transpose explicitly."""
import cuda.tile as ct

ORACLE = [{"kernel": "xt_times_w", "args": ("f16:2", "f16:2", "f32:2", 16, 16), "compiles": True}]


@ct.kernel
def xt_times_w(x, w, out, tm: ct.Constant[int], tk: ct.Constant[int]):
    xt = ct.transpose(ct.load(x, index=(0, ct.bid(0)), shape=(tk, tm)))
    wt = ct.load(w, index=(0, 0), shape=(tk, tm))
    acc = ct.mma(xt, wt, ct.zeros((tm, tm), dtype=ct.float32))
    ct.store(out, index=(ct.bid(0), 0), tile=acc)
