// Python buffers as strata::Buffer views of the caller's memory, and reduction operators.
//
// Any object exporting DLPack (__dlpack__: numpy, torch, jax, cupy...) or the buffer protocol
// (numpy, bytearray, memoryview) is accepted, but only as it is: nanobind is never allowed to
// convert, so the collective reads and writes the caller's own memory. CPU memory and CUDA device
// memory are taken (the latter goes by the device path, docs/device.md); whatever cannot be used
// that way (non-contiguous, unsupported dtype, read-only output, another device's memory, a torch
// lazy conjugate or negative view) raises TypeError here, before the operation is issued.
#include <array>
#include <sstream>

#include "bindings.hpp"

namespace strata::py {
namespace {

using nb::dlpack::dtype_code;

struct DtypeEntry {
  dtype_code code;
  uint8_t bits;
  DataType type;
  std::string_view name;
};

// DLPack (code, bits) of every dtype Strata reduces, with numpy/torch's name for it.
constexpr std::array<DtypeEntry, 14> kDtypes{{
    {dtype_code::Float, 32, DataType::f32, "float32"},
    {dtype_code::Float, 64, DataType::f64, "float64"},
    {dtype_code::Float, 16, DataType::f16, "float16"},
    {dtype_code::Bfloat, 16, DataType::bf16, "bfloat16"},
    {dtype_code::Int, 8, DataType::i8, "int8"},
    {dtype_code::Int, 16, DataType::i16, "int16"},
    {dtype_code::Int, 32, DataType::i32, "int32"},
    {dtype_code::Int, 64, DataType::i64, "int64"},
    {dtype_code::UInt, 8, DataType::u8, "uint8"},
    {dtype_code::UInt, 32, DataType::u32, "uint32"},
    {dtype_code::UInt, 64, DataType::u64, "uint64"},
    {dtype_code::Bool, 8, DataType::boolean, "bool"},
    {dtype_code::Complex, 64, DataType::c64, "complex64"},
    {dtype_code::Complex, 128, DataType::c128, "complex128"},
}};

std::string supported_dtypes() {
  std::string s;
  for (const auto& e : kDtypes) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

// "uint16", "float8_e4m3fn" (as code N), ... for the message about an unsupported dtype.
std::string dlpack_dtype_name(nb::dlpack::dtype t) {
  std::string base;
  switch (dtype_code(t.code)) {
    case dtype_code::Int:
      base = "int";
      break;
    case dtype_code::UInt:
      base = "uint";
      break;
    case dtype_code::Float:
      base = "float";
      break;
    case dtype_code::Bfloat:
      base = "bfloat";
      break;
    case dtype_code::Complex:
      base = "complex";
      break;
    case dtype_code::Bool:
      base = "bool";
      break;
    default:
      base = "dlpack_code" + std::to_string(t.code) + "_";
      break;
  }
  std::string s = base + std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

std::string py_type_name(nb::handle obj) { return Py_TYPE(obj.ptr())->tp_name; }

// What the object claims to be when nanobind could not import it (e.g. numpy float128, object
// arrays: neither DLPack nor the buffer protocol can describe them).
std::string describe_unimportable(nb::handle obj) {
  PyErr_Clear();  // a failed import may leave its error behind
  std::string s = py_type_name(obj);
  if (nb::hasattr(obj, "dtype")) {
    try {
      nb::object dtype = obj.attr("dtype");
      nb::object text = nb::steal(PyObject_Str(dtype.ptr()));
      if (text.is_valid() && PyUnicode_Check(text.ptr())) {
        s += std::string(" of dtype ") + PyUnicode_AsUTF8(text.ptr());
      }
    } catch (const nb::python_error&) {
    }
    PyErr_Clear();
  }
  return s;
}

std::string tuple_text(const int64_t* v, size_t n) {
  std::ostringstream o;
  o << "(";
  for (size_t i = 0; i < n; ++i) o << v[i] << (n == 1 ? "," : i + 1 < n ? ", " : "");
  o << ")";
  return o.str();
}

// DLPack device types that are ordinary host memory (kDLCPU, kDLCUDAHost pinned memory), and
// CUDA device memory (kDLCUDA).
bool is_host(int device_type) { return device_type == 1 || device_type == 3; }
constexpr int kDLCUDA = 2;

// torch's lazy conjugate and negative views (x.conj(), x.conj().imag) are flags on the tensor:
// its memory holds the values unconjugated, unnegated. torch's own __dlpack__ refuses them; so
// does Strata, which reads the memory. Only objects with is_conj (torch tensors) are asked.
void refuse_lazy_views(nb::handle obj, const std::string& where) {
  if (!nb::hasattr(obj, "is_conj")) return;
  if (nb::cast<bool>(obj.attr("is_conj")())) {
    throw nb::type_error((where + " is a lazy conjugate view (x.conj()) whose memory holds the "
                                  "unconjugated values; pass x.resolve_conj()")
                             .c_str());
  }
  if (nb::hasattr(obj, "is_neg") && nb::cast<bool>(obj.attr("is_neg")())) {
    throw nb::type_error((where + " is a lazy negative view (e.g. x.conj().imag) whose memory "
                                  "holds the values unnegated; pass x.resolve_neg()")
                             .c_str());
  }
}

}  // namespace

Buffer Buffers::input(nb::handle obj, const char* what) {
  Held a;
  // convert=false: nanobind must hand over the object's own memory, never a converted copy.
  if (!nb::try_cast(obj, a, /*convert=*/false)) {
    throw nb::type_error(("strata." + std::string(op_) + ": " + what +
                          " must be an array exposing DLPack or the "
                          "buffer protocol with a supported dtype (" +
                          supported_dtypes() + "); got " + describe_unimportable(obj))
                             .c_str());
  }
  return view(a, obj, what);
}

Buffer Buffers::output(nb::handle obj, const char* what) {
  nb::ndarray<> writable;
  if (!nb::try_cast(obj, writable, /*convert=*/false)) {
    // Find out why: readable but not writable means a read-only array.
    Held readable;
    if (nb::try_cast(obj, readable, /*convert=*/false)) {
      throw nb::type_error(("strata." + std::string(op_) + ": " + what +
                            " is written by the operation but the " + py_type_name(obj) +
                            " given is read-only")
                               .c_str());
    }
    input(obj, what);  // raises the TypeError that names what is wrong with it
    throw nb::type_error(
        ("strata." + std::string(op_) + ": " + what + " cannot be written").c_str());
  }
  return view(Held(writable), obj, what);
}

Buffer Buffers::view(const Held& a, nb::handle obj, const char* what) {
  const std::string where = "strata." + std::string(op_) + ": " + what;
  refuse_lazy_views(obj, where);
  if (!is_host(a.device_type()) && a.device_type() != kDLCUDA) {
    throw nb::type_error((where + " lives in device memory of DLPack device type " +
                          std::to_string(a.device_type()) +
                          "; Strata takes CPU memory and CUDA device memory (type 2)")
                             .c_str());
  }
  const auto dt = a.dtype();
  const DtypeEntry* entry = nullptr;
  for (const auto& e : kDtypes) {
    if (uint8_t(e.code) == dt.code && e.bits == dt.bits && dt.lanes == 1) entry = &e;
  }
  if (!entry) {
    throw nb::type_error((where + " has dtype " + dlpack_dtype_name(dt) +
                          ", which Strata does not support (supported: " + supported_dtypes() + ")")
                             .c_str());
  }
  // C order required, as in nanobind's own check: dimensions of extent 1 may have any stride,
  // and an array of at most one element is always contiguous.
  size_t count = 1;
  for (size_t i = 0; i < a.ndim(); ++i) count *= a.shape(i);
  if (count > 1 && a.ndim() > 0) {
    int64_t expected = 1;
    for (size_t i = a.ndim(); i-- > 0;) {
      if (a.shape(i) != 1 && a.stride(i) != expected) {
        throw nb::type_error(
            (where + " (" + py_type_name(obj) + " of shape " + tuple_text(a.shape_ptr(), a.ndim()) +
             ", strides " + tuple_text(a.stride_ptr(), a.ndim()) +
             " in elements) is not C-contiguous; Strata never copies, so pass a contiguous "
             "array (numpy.ascontiguousarray(x), tensor.contiguous())")
                .c_str());
      }
      expected *= int64_t(a.shape(i));
    }
  }
  held_.push_back(a);
  return Buffer{const_cast<void*>(a.data()), count, entry->type,
                a.device_type() == kDLCUDA ? MemoryKind::cuda : MemoryKind::host};
}

ReduceOp parse_op(nb::handle op) {
  ReduceOp e;
  if (nb::try_cast(op, e, /*convert=*/false)) return e;
  if (!nb::isinstance<nb::str>(op)) {
    throw nb::type_error(("strata: op must be a strata.ReduceOp or its name, not " +
                          std::string(nb::type_name(op.type()).c_str()) + " " +
                          std::string(nb::repr(op).c_str()))
                             .c_str());
  }
  const std::string name = nb::borrow<nb::str>(op).c_str();
  for (int i = 0; i <= int(kLastReduceOp); ++i) {
    if (op_name(ReduceOp(i)) == name) return ReduceOp(i);
  }
  throw nb::value_error(("strata: unknown reduction operator '" + name +
                         "' (expected one of sum, prod, min, max, avg, band, bor, bxor)")
                            .c_str());
}

}  // namespace strata::py
