// The one native extension, attnkit_native, in one translation unit: the checked entry points of the
// attention kernels (attention_ops.h), of LayerNorm (norm_ops.h) and of linear layers over a few rows
// (linear_ops.h), and layers made of them: a decoder layer's step (decoder_step.h) and an encoder or
// non-autoregressive decoder layer over whole rows (layer_forward.h), and the best allowed token of each
// row of logits (best_tokens.h), and a non-autoregressive model's first pass made of them
// (nat_first_pass.h), bound to Python. The kernels
// release the GIL and run on ATen's threads (at::parallel_for, built with -fopenmp).

#include <torch/extension.h>

#include "attention_ops.h"
#include "best_tokens.h"
#include "linear_ops.h"
#include "norm_ops.h"
#include "layer_forward.h"
#include "decoder_step.h"
#include "nat_first_pass.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace attnkit_ops;
  const auto nogil = py::call_guard<py::gil_scoped_release>();
  m.def("window_forward", &window_forward, "exact windowed attention forward (float32 / bfloat16, AVX-512)", nogil);
  m.def("window_backward", &window_backward, "its backward (float32, recomputing the weights)", nogil);
  m.def("short_forward", &short_forward, "full attention for short sequences (float32 / bfloat16, AVX-512)", nogil);
  m.def("add_norm", &add_norm, "LayerNorm(x + r) over the last dimension (float32 / bfloat16, AVX-512)", nogil);
  m.def("small_linear", &small_linear, "act(x W^T + b) + r, or LN(r + x W^T + b), for a few rows of x (float32 / "
        "bfloat16, AVX-512)", py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("residual"), py::arg("act"),
        py::arg("ln_weight") = py::none(), py::arg("ln_bias") = py::none(), py::arg("eps") = 1e-5,
        py::arg("x_norm_weight") = py::none(), py::arg("x_norm_bias") = py::none(), nogil);
  m.def("decoder_layer_step", &decoder_layer_step, "one decoder layer for one new position of every row "
        "(FastSeq2Seq's step: small_linear and short_forward in one call)", py::arg("x"), py::arg("w"),
        py::arg("keys"), py::arg("values"), py::arg("t"), py::arg("cross_keys"), py::arg("cross_values"),
        py::arg("cross_lengths"), py::arg("group"), py::arg("norm_first"), py::arg("act"), py::arg("eps"),
        py::arg("scale"), nogil);
  m.def("layer_forward", &layer_forward, "one encoder layer, or non-autoregressive decoder layer, over every "
        "position of a few short rows (small_linear and short_forward in one call)", py::arg("x"), py::arg("w"),
        py::arg("num_heads"), py::arg("lengths"), py::arg("cross_keys"), py::arg("cross_values"),
        py::arg("cross_lengths"), py::arg("norm_first"), py::arg("act"), py::arg("eps"), py::arg("scale"), nogil);
  m.def("layers_forward", &layers_forward, "layer_forward of several layers in turn, in one call (an encoder's, "
        "or a non-autoregressive decoder's with each layer's cross keys and values)", py::arg("x"), py::arg("ws"),
        py::arg("num_heads"), py::arg("lengths"), py::arg("cross_keys"), py::arg("cross_values"),
        py::arg("cross_lengths"), py::arg("norm_first"), py::arg("act"), py::arg("eps"), py::arg("scale"), nogil);
  m.def("best_tokens", &best_tokens, "each row's best allowed token and its log-probability (float32 logits)",
        py::arg("logits"), py::arg("suppressed"), nogil);
  py::class_<NatFirstPass>(m, "NatFirstPass", "a non-autoregressive model's first pass over one unpadded "
                           "sentence, in one call (nat_first_pass.h)")
      .def(py::init<at::Tensor, at::Tensor, std::vector<std::vector<at::Tensor>>, std::vector<at::Tensor>,
                    std::vector<std::vector<at::Tensor>>, std::vector<at::Tensor>, double, int64_t, bool, int64_t,
                    double, double, std::vector<at::Tensor>, int64_t, std::vector<at::Tensor>,
                    std::vector<at::Tensor>, std::vector<int64_t>, at::Tensor, int64_t>(),
           py::arg("src_table"), py::arg("positions"), py::arg("encoder"), py::arg("encoder_norm"),
           py::arg("decoder"), py::arg("decoder_norm"), py::arg("norm_eps"), py::arg("num_heads"),
           py::arg("norm_first"), py::arg("act"), py::arg("eps"), py::arg("scale"), py::arg("length"),
           py::arg("length_offset"), py::arg("cross_kv"), py::arg("output"), py::arg("linear_sizes"),
           py::arg("mask_rows"), py::arg("max_rows"))
      .def("__call__", &NatFirstPass::operator(), py::arg("input_ids"), py::arg("suppressed"), nogil);
  m.def("cpu_has_bf16", &cpu_has_bf16, "whether this CPU has AVX512-BF16");
}
