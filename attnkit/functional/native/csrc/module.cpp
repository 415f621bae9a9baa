// The kernels' extension, attnkit_native, in one translation unit: the checked entry points of the attention
// kernels (attention_ops.h), of LayerNorm (norm_ops.h), of linear layers over a few rows (linear_ops.h) and of
// the best allowed token of each row of logits (best_tokens.h) and the K/V cache's row moves (gather.h),
// bound to Python. The compositions of whole layers made of them are the inference layer's
// (attnkit/inference/native/csrc). The kernels release the GIL and run on ATen's threads (at::parallel_for,
// built with -fopenmp). One source, built per instruction-set variant (csrc/vec.h, functional/native/isa.py).

#include <torch/extension.h>

#include "attention_ops.h"
#include "best_tokens.h"
#include "gather.h"
#include "linear_ops.h"
#include "norm_ops.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace ATTNKIT_VARIANT::attnkit_ops;
  const auto nogil = py::call_guard<py::gil_scoped_release>();
  m.def("window_forward", &window_forward, "exact windowed attention forward (float32 / bfloat16)", nogil);
  m.def("window_backward", &window_backward, "its backward (float32, recomputing the weights)", nogil);
  m.def("short_forward", &short_forward, "full attention for short sequences (float32 / bfloat16)", nogil);
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
}
