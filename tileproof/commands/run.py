"""``tileproof run``: run lesson programs on this machine's GPU, record each run (``runner.session``)."""

from __future__ import annotations

import argparse

from tileproof.commands import add_lesson, add_root
from tileproof.fleet import devices
from tileproof.records.errors import TileproofError
from tileproof.runner import session
from tileproof.runner.process import add_output_cap, install_signal_handlers
from tileproof.toolchain import cuda_tile


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lesson(parser, many=True, help="the lessons whose programs to run: lessons/LESSON.md (default: every program)")
    parser.add_argument("--program", action="append", default=[], metavar="NAME",
                        help="a program path or file name (repeatable)")
    parser.add_argument("--device", type=int, default=0, metavar="N", help="GPU index (default 0)")
    parser.add_argument("--devices", default=None, metavar="all|N,M",
                        help="every listed GPU at once, one run session per GPU (tileproof.fleet.devices)")
    parser.add_argument("--timeout", type=float, default=900.0, metavar="S", help="per-program timeout in seconds")
    add_output_cap(parser)
    add_root(parser)
    parser.add_argument("--session-id", default=None, metavar="ID",
                        help="the session's id (what --devices gives each GPU's session, to read its records back)")
    parser.add_argument("--record-no-gpu", action="store_true",
                        help="without a usable GPU, still run each program's gate and record the no-gpu runs "
                             "(default: say so in one line, exit 1, write nothing)")
    parser.add_argument("--python-only", action="store_true",
                        help="only the cuTile Python programs (kernels/*.py): a cuda-tile release's share of the "
                             "runs (nox -s run-gpu-release)")
    parser.add_argument(cuda_tile.OUTSIDE_FLAG, action="store_true",
                        help="run the Python programs although tileiras is outside the range the installed "
                             "cuda-tile release declares; each record says so (default: refuse, write nothing)")


def run(args: argparse.Namespace) -> int:
    install_signal_handlers()
    request = session.Request(root=args.root.resolve(), lessons=tuple(args.lessons), programs=tuple(args.program),
                              device=args.device, timeout=args.timeout, cap=args.output_cap,
                              record_no_gpu=args.record_no_gpu, python_only=args.python_only,
                              outside_range=args.tileiras_outside_range, session_id=args.session_id)
    if args.devices is not None:
        if args.session_id is not None:
            raise TileproofError("--session-id with --devices: each GPU's session gets its own id (fix: leave "
                                 "--session-id out)")
        return devices.fan_out(args.devices, request)
    ended = session.run(request)
    if isinstance(ended, session.NoGpu):
        print(f"run: no usable GPU: {ended.reason}; nothing run or recorded (--record-no-gpu records the gates)")
        return 1
    print(f"run: {ended.summary()}")
    return 0 if ended.passed else 1
