"""AOT signatures are checked against the kernel's parameters, inferred where its annotations decide
them, and otherwise refused in one line that says what to write."""

import textwrap

import pytest

pytest.importorskip("cuda.tile")

from tileproof.records.errors import RecordError  # noqa: E402
from tileproof.toolchain.aot import declared_kernels  # noqa: E402

HEAD = """
from typing import Annotated
import cuda.tile as ct
from cuda.tile.compilation import CallingConvention, KernelSignature, ScalarConstraint, ArrayConstraint

def arr():
    return ArrayConstraint(ct.float32, 1, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                           may_alias_internally=False, stride_constant=(1,), base_addr_divisible_by=16)

def sig(*p):
    return KernelSignature(list(p), CallingConvention.cutile_python_v1())

@ct.kernel
def scaled(a, c, alpha: float, tile: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(tile,))
    ct.store(c, index=(i,), tile=alpha * x)
"""


def program(tmp_path, body):
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(HEAD) + textwrap.dedent(body))
    return path


def test_a_runtime_float_given_as_a_constant_is_refused_with_scalar_constraint(tmp_path):
    path = program(tmp_path, 'AOT_SIGNATURES = {"scaled": [sig(arr(), arr(), 0.75, 1024)]}\n')
    with pytest.raises(RecordError) as e:
        declared_kernels(path)
    assert "parameter 'alpha' is a runtime parameter" in str(e.value)
    assert "ScalarConstraint(ct.float32)" in str(e.value)


def test_the_right_signature_is_accepted(tmp_path):
    path = program(tmp_path, 'AOT_SIGNATURES = {"scaled": [sig(arr(), arr(), ScalarConstraint(ct.float32), 1024)]}\n')
    assert list(declared_kernels(path)) == ["scaled"]


def test_a_constant_parameter_needs_its_value(tmp_path):
    path = program(tmp_path, 'AOT_SIGNATURES = {"scaled": [sig(arr(), arr(), ScalarConstraint(ct.float32), '
                             'ScalarConstraint(ct.int32))]}\n')
    with pytest.raises(RecordError, match="parameter 'tile' is a ct.Constant"):
        declared_kernels(path)


def test_a_missing_signature_names_every_parameter(tmp_path):
    path = program(tmp_path, "AOT_SIGNATURES = {}\n")
    with pytest.raises(RecordError) as e:
        declared_kernels(path)
    text = str(e.value)
    assert "AOT_SIGNATURES['scaled']: missing" in text
    assert "a: harness.aot_array(DTYPE, NDIM)" in text
    assert "tile: its ct.Constant value" in text


def test_wrong_parameter_count_is_one_line(tmp_path):
    path = program(tmp_path, 'AOT_SIGNATURES = {"scaled": [sig(arr(), 1024)]}\n')
    with pytest.raises(RecordError, match="gives 2 entries for 4 parameters"):
        declared_kernels(path)


def test_scalar_annotations_decide_a_signature(tmp_path):
    path = program(tmp_path, """
        from cuda.tile._stub import ScalarAnnotation  # cuda-tile 1.7.0 does not export it yet

        @ct.kernel
        def only_scalars(n: Annotated[int, ScalarAnnotation(dtype=ct.int64)]):
            pass

        AOT_SIGNATURES = {"scaled": [sig(arr(), arr(), ScalarConstraint(ct.float32), 1024)]}
        """)
    found = declared_kernels(path)
    [inferred] = found["only_scalars"]
    assert [type(p).__name__ for p in inferred.parameters] == ["ScalarConstraint"]
    assert inferred.parameters[0].dtype.name == "int64"


@pytest.mark.parametrize(("body", "says"), [
    ("AOT_SIGNATURES = {}\n",
     "AOT_SIGNATURES: is empty and the file defines no @ct.kernel function: nothing to export"),
    ("AOT_SIGNATURES = []\n", "AOT_SIGNATURES: expected a dict of kernel name -> signatures, found list"),
    ("x = 1\n", "AOT_SIGNATURES: expected a dict of kernel name -> signatures, found none"),
])
def test_a_declaration_without_kernels_says_what_is_wrong(tmp_path, body, says):
    """A new author's first empty program: the line says what is missing, never "expected a dict, found dict"."""
    path = tmp_path / "empty.py"
    path.write_text(body)
    with pytest.raises(RecordError) as e:
        declared_kernels(path)
    assert says in str(e.value)
    assert "expected a dict, found dict" not in str(e.value)
