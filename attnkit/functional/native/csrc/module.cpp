// The kernels' extension, attnkit_native, in one translation unit: the checked entry points of the attention
// kernels (attention_ops.h), of LayerNorm (norm_ops.h), of linear layers over a few rows (linear_ops.h) and of
// the best allowed token of each row of logits (best_tokens.h) and the K/V cache's row moves (gather.h),
// bound to Python. The compositions of whole layers made of them are the inference layer's
// (attnkit/inference/native/csrc). The kernels release the GIL and run on ATen's threads (at::parallel_for,
// built with -fopenmp). One source, built per instruction-set variant (csrc/vec.h, functional/native/isa.py).

#include <torch/python.h>  // ATen and pybind11's tensor casters, without torch/extension.h's C++ frontend

#include "attention_ops.h"
#include "best_tokens.h"
#include "gather.h"
#include "int8_ops.h"
#include "linear_ops.h"
#include "norm_ops.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace ATTNKIT_VARIANT::attnkit_ops;
  const auto nogil = py::call_guard<py::gil_scoped_release>();
  m.def("window_forward", &window_forward, "exact windowed attention forward (float32 / bfloat16)", nogil);
  m.def("window_backward", &window_backward, "its backward (float32, recomputing the weights)", nogil);
  m.def("short_forward", &short_forward, "full attention for short sequences (float32 / bfloat16)", py::arg("q"),
        py::arg("k"), py::arg("v"), py::arg("lengths"), py::arg("offsets"), py::arg("scale"),
        py::arg("rows") = py::none(), nogil);
  m.def("add_norm", &add_norm, "LayerNorm(x + r) over the last dimension (float32 / bfloat16)", nogil);
  m.def("small_linear", &small_linear, "act(x W^T + b) + r, or LN(r + x W^T + b), for a few rows of x (float32 / "
        "bfloat16)", py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("residual"), py::arg("act"),
        py::arg("ln_weight") = py::none(), py::arg("ln_bias") = py::none(), py::arg("eps") = 1e-5,
        py::arg("x_norm_weight") = py::none(), py::arg("x_norm_bias") = py::none(), nogil);
  m.def("best_tokens", &best_tokens, "each row's best allowed token and its log-probability (float32 logits)",
        py::arg("logits"), py::arg("suppressed"), nogil);
  m.def("gather_rows", &gather_rows, "out[t, i] = src[t, index[i]] for t < n: rows of a time-major buffer moved by "
        "memcpy (any dtype)", py::arg("src"), py::arg("index"), py::arg("n"), py::arg("out"), nogil);
  m.def("cpu_has_bf16", &cpu_has_bf16, "whether this CPU has AVX512-BF16");
  py::class_<Int8Weight>(m, "Int8Weight", py::module_local(), "a linear layer's int8 weight as int8_linear takes it, "
                         "checked once (int8_ops.h)")
      .def(py::init<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, double>(),
           py::arg("w"), py::arg("wt"), py::arg("scale"), py::arg("wsum"), py::arg("bias"), py::kw_only(),
           py::arg("outputs"), py::arg("outliers"), py::arg("act_max"))
      .def_property_readonly("panels", &Int8Weight::panels)
      .def_readonly("outputs", &Int8Weight::outputs);
  m.def("int8_linear", &int8_linear, "act(x W^T + b) + r, or LN(r + x W^T + b), W int8 and x quantised per row "
        "(float32 in and out)", py::arg("x"), py::arg("weight"), py::arg("residual") = py::none(), py::arg("act") = 0,
        py::arg("ln_weight") = py::none(), py::arg("ln_bias") = py::none(), py::arg("eps") = 1e-5,
        py::arg("x_norm_weight") = py::none(), py::arg("x_norm_bias") = py::none(), nogil);
  m.def("cpu_has_fast_dot", [] { return int8_detail::fast_dot(); }, "whether the int8 products run the CPU's "
        "fast dot products (AVX512-VNNI, NEON's sdot)");
}
