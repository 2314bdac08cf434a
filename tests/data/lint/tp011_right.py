"""The large extent goes on grid x; y and z stay small."""
import cuda.tile as ct

ROWS = 100_000


@ct.kernel
def fill(y, tile: ct.Constant[int]):
    ct.store(y, index=(ct.bid(0), ct.bid(1)), tile=ct.zeros((1, tile), dtype=ct.float32))


def launch(stream, y, n_blocks):
    ct.launch(stream, (ROWS, 1, 1), fill, (y, 128))
    ct.launch(stream, (n_blocks, 1, 1), fill, (y, 128))   # computed: not judged
