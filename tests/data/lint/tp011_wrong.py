"""Launch grids past the CUDA limits (x <= 2^31-1, y and z <= 65535): the launch fails."""
import cuda.tile as ct

ROWS = 100_000


@ct.kernel
def fill(y, tile: ct.Constant[int]):
    ct.store(y, index=(ct.bid(0), ct.bid(1)), tile=ct.zeros((1, tile), dtype=ct.float32))


def launch(stream, y):
    ct.launch(stream, (1, ROWS, 1), fill, (y, 128))  # expect: TP011
    grid = (2**31, 1, 1)  # expect: TP011
    ct.launch(stream, grid, fill, (y, 128))
