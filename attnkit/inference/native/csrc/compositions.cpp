// The native compositions of the inference layer, one extension (attnkit_inference): a Transformer layer's
// weights as a struct with named fields (layer_weights.h; its linear layers float32, bfloat16 or int8), an
// encoder or non-autoregressive decoder layer over a few short rows (layer_forward.h), a decoder layer's step
// (decoder_step.h) and a non-autoregressive model's first pass (nat_first_pass.h), all made of the kernels'
// checked entry points of attnkit/functional/native/csrc (built with these sources, their headers included here),
// bound to Python. The calls release the GIL and run on ATen's threads (built with -fopenmp).

#include <torch/python.h>  // ATen and pybind11's tensor casters, without torch/extension.h's C++ frontend

#include "attention_ops.h"
#include "best_tokens.h"
#include "int8_ops.h"
#include "linear_ops.h"
#include "layer_forward.h"
#include "decoder_step.h"
#include "nat_first_pass.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace ATTNKIT_VARIANT::attnkit_ops;
  const auto nogil = py::call_guard<py::gil_scoped_release>();
  // module_local: two builds of these kernels in one process (another variant, or another commit in an A/B)
  // each keep their own Python types.
  py::class_<Int8Weight>(m, "Int8Weight", py::module_local(), "a linear layer's int8 weight, checked once (int8_ops.h)")
      .def(py::init<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, double>(),
           py::arg("w"), py::arg("wt"), py::arg("scale"), py::arg("wsum"), py::arg("bias"), py::kw_only(),
           py::arg("outputs"), py::arg("outliers"), py::arg("act_max"));
  py::class_<LayerWeights>(m, "LayerWeights", py::module_local(),
                           "a Transformer layer's packed weights and settings, checked once (layer_weights.h)")
      .def(py::init<const LinearArg&, const LinearArg&, const LinearArg&, const LinearArg&, const TensorPair&,
                    const TensorPair&, const std::optional<LinearArg>&, const std::optional<LinearArg>&,
                    const std::optional<TensorPair>&, int64_t, bool, int64_t, double, double>(),
           py::arg("qkv"), py::arg("self_out"), py::arg("ff1"), py::arg("ff2"), py::arg("self_norm"),
           py::arg("ff_norm"), py::arg("cross_q") = py::none(), py::arg("cross_out") = py::none(),
           py::arg("cross_norm") = py::none(), py::kw_only(), py::arg("num_heads"), py::arg("norm_first"),
           py::arg("act"), py::arg("eps"), py::arg("scale"))
      .def_readonly("cross", &LayerWeights::cross)
      .def_readonly("blocked", &LayerWeights::blocked)
      .def_readonly("d", &LayerWeights::d)
      .def_readonly("num_heads", &LayerWeights::num_heads);
  py::class_<LayerStack>(m, "LayerStack", py::module_local(),
                         "layers of one kind and the same settings, run in one call")
      .def(py::init<std::vector<LayerWeights>>(), py::arg("layers"))
      .def("__len__", [](const LayerStack& s) { return s.layers.size(); });
  py::class_<PackedRows>(m, "PackedRows", py::module_local(),
                         "a linear layer in both of small_linear's layouts, chosen by the rows")
      .def(py::init<at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t>(), py::arg("blocked"), py::arg("panels"),
           py::arg("bias"), py::arg("panels_from"), py::arg("outputs"));
  m.def("layer_forward", &layer_forward, "one encoder layer, or non-autoregressive decoder layer, over every "
        "position of a few short rows (small_linear and short_forward in one call)", py::arg("x"), py::arg("layer"),
        py::arg("lengths"), py::arg("cross_keys") = py::none(), py::arg("cross_values") = py::none(),
        py::arg("cross_lengths"), nogil);
  m.def("layers_forward", &layers_forward, "layer_forward of a stack's layers in turn, in one call (an encoder's, "
        "or a non-autoregressive decoder's with each layer's cross keys and values)", py::arg("x"), py::arg("stack"),
        py::arg("lengths"), py::arg("cross_keys"), py::arg("cross_values"), py::arg("cross_lengths"), nogil);
  m.def("decoder_layer_step", &decoder_layer_step, "one decoder layer for one new position of every row "
        "(a decoding step: small_linear and short_forward in one call)", py::arg("x"), py::arg("layer"),
        py::arg("keys"), py::arg("values"), py::arg("t"), py::arg("cross_keys"), py::arg("cross_values"),
        py::arg("cross_lengths"), py::arg("group"), py::arg("rows") = py::none(), nogil);
  py::class_<NatFirstPass>(m, "NatFirstPass", py::module_local(),
                           "a non-autoregressive model's first pass over one unpadded sentence, in one call "
                           "(nat_first_pass.h)")
      .def(py::init<LayerStack, LayerStack, at::Tensor, at::Tensor, at::Tensor, std::optional<TensorPair>,
                    std::optional<TensorPair>, double, std::optional<PackedRows>, int64_t,
                    std::optional<std::pair<int64_t, int64_t>>, PackedRows, PackedRows, int64_t, int64_t>(),
           py::kw_only(), py::arg("encoder"), py::arg("decoder"), py::arg("src_table"), py::arg("positions"),
           py::arg("mask_rows"), py::arg("encoder_norm"), py::arg("decoder_norm"), py::arg("norm_eps"),
           py::arg("length"), py::arg("length_offset"), py::arg("ctc_row"), py::arg("cross_kv"), py::arg("output"),
           py::arg("max_rows"), py::arg("max_row"))
      .def("__call__", &NatFirstPass::operator(), py::arg("input_ids"), py::arg("suppressed"),
           py::arg("shift_id") = -1, py::arg("shift") = 0.0, nogil);
}
